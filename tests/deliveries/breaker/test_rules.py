"""Pure rules of endpoint health: auto-suspension and the circuit breaker."""

from datetime import UTC, datetime, timedelta

import pytest

from deliveries.breaker import rules
from deliveries.breaker.rules import BreakerSettings, BreakerVerdict
from deliveries.endpoints import suspension_rules

NOW = datetime(2026, 4, 15, 12, 0, tzinfo=UTC)
SETTINGS = BreakerSettings(
    error_rate=0.5, min_attempts=10, window_seconds=300, cooldown_seconds=30, ramp_seconds=60
)


@pytest.mark.parametrize(
    ("failures", "since_minutes", "expected"),
    [
        (20, 61, True),
        (20, 59, False),  # a burst: many failures, but not spread over the window
        (19, 120, False),  # long, but not enough failures
        (200, 60, True),
    ],
)
def test_suspension_needs_enough_failures_over_the_window(
    failures: int, since_minutes: int, expected: bool
) -> None:
    assert (
        suspension_rules.should_suspend(
            consecutive_failures=failures,
            failing_since=NOW - timedelta(minutes=since_minutes),
            now=NOW,
            threshold=20,
            window_seconds=3600,
        )
        is expected
    )


def test_suspension_off_or_without_a_streak() -> None:
    common = {"consecutive_failures": 50, "now": NOW, "window_seconds": 0}
    assert not suspension_rules.should_suspend(failing_since=NOW, threshold=0, **common)  # type: ignore[arg-type]
    assert not suspension_rules.should_suspend(failing_since=None, threshold=5, **common)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("total", "failed", "expected"),
    [(10, 5, True), (10, 4, False), (9, 9, False), (100, 50, True), (0, 0, False)],
)
def test_the_breaker_opens_on_a_high_error_rate_over_enough_attempts(
    total: int, failed: int, expected: bool
) -> None:
    assert rules.should_open(total=total, failed=failed, settings=SETTINGS) is expected


def verdict(state: str, seconds_ago: float | None, draw: float = 0.0) -> BreakerVerdict:
    changed = None if seconds_ago is None else NOW - timedelta(seconds=seconds_ago)
    return rules.breaker_verdict(
        state=state, changed_at=changed, now=NOW, settings=SETTINGS, draw=draw
    )


def test_open_waits_for_the_cool_down_then_probes() -> None:
    waiting = verdict(rules.OPEN, 10)
    assert waiting.action == BreakerVerdict.WAIT
    assert waiting.wait_seconds == pytest.approx(20)
    assert verdict(rules.OPEN, 31).action == BreakerVerdict.PROBE


def test_half_open_lets_only_the_probe_through_until_it_times_out() -> None:
    assert verdict(rules.HALF_OPEN, 1).action == BreakerVerdict.WAIT
    assert verdict(rules.HALF_OPEN, SETTINGS.probe_timeout_seconds + 1).action == (
        BreakerVerdict.PROBE
    )


def test_closed_ramps_traffic_up_gradually() -> None:
    assert verdict(rules.CLOSED, None, draw=0.99).action == BreakerVerdict.SEND
    assert verdict(rules.CLOSED, 600, draw=0.99).action == BreakerVerdict.SEND
    # 15 s into a 60 s ramp, a quarter of deliveries go through.
    assert verdict(rules.CLOSED, 15, draw=0.2).action == BreakerVerdict.SEND
    assert verdict(rules.CLOSED, 15, draw=0.3).action == BreakerVerdict.WAIT
    assert rules.ramp_share(seconds_since_closed=0, settings=SETTINGS) == rules.RAMP_FLOOR


def test_transitions_after_an_attempt() -> None:
    after = rules.after_attempt
    assert after(state=rules.HALF_OPEN, succeeded=True, total=0, failed=0, settings=SETTINGS) == (
        rules.CLOSED
    )
    assert after(state=rules.HALF_OPEN, succeeded=False, total=0, failed=0, settings=SETTINGS) == (
        rules.OPEN
    )
    assert after(state=rules.CLOSED, succeeded=False, total=10, failed=5, settings=SETTINGS) == (
        rules.OPEN
    )
    assert after(state=rules.CLOSED, succeeded=True, total=10, failed=5, settings=SETTINGS) is None
    assert after(state=rules.OPEN, succeeded=False, total=0, failed=0, settings=SETTINGS) is None
