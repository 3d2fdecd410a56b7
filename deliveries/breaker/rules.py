"""Pure rules of endpoint health: auto-suspension and the circuit breaker. No I/O.

Auto-suspension: an endpoint that keeps failing is suspended, but only when
the failures are both numerous and spread over time, so a one-minute outage that fails a
burst of deliveries does not suspend a healthy integration.

Circuit breaker: while an endpoint's recent error rate is high, sending more only adds load
to a struggling endpoint and ties up our workers; deliveries wait (without spending
attempts) until a cool-down passes, one probe tests the water (half-open), and after a
successful probe traffic comes back gradually instead of as one burst of the backlog.
"""

from dataclasses import dataclass
from datetime import datetime

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
# At the start of a ramp this share of deliveries is let through, growing to all of them.
RAMP_FLOOR = 0.1
# How long a delivery refused by the breaker waits while a probe is out or during a ramp.
SHORT_WAIT_SECONDS = 1.0


@dataclass(frozen=True)
class BreakerSettings:
    error_rate: float = 0.5
    min_attempts: int = 10
    window_seconds: float = 300.0
    cooldown_seconds: float = 30.0
    ramp_seconds: float = 60.0
    # A half-open breaker whose probe never reported (worker lost) allows another after this.
    probe_timeout_seconds: float = 120.0


@dataclass(frozen=True)
class BreakerVerdict:
    SEND = "send"
    PROBE = "probe"
    WAIT = "wait"

    action: str
    wait_seconds: float = 0.0
    reason: str = ""


def should_open(*, total: int, failed: int, settings: BreakerSettings) -> bool:
    """True when the window holds enough attempts and enough of them failed."""
    if total <= 0 or total < settings.min_attempts:
        return False
    return failed / total >= settings.error_rate


def ramp_share(*, seconds_since_closed: float, settings: BreakerSettings) -> float:
    """The share of deliveries let through this long after the circuit closed again."""
    if settings.ramp_seconds <= 0 or seconds_since_closed >= settings.ramp_seconds:
        return 1.0
    return max(RAMP_FLOOR, seconds_since_closed / settings.ramp_seconds)


def breaker_verdict(
    *,
    state: str,
    changed_at: datetime | None,
    now: datetime,
    settings: BreakerSettings,
    draw: float,
) -> BreakerVerdict:
    """What to do with a delivery given the breaker's state; `draw` is uniform in [0, 1)."""
    elapsed = (now - changed_at).total_seconds() if changed_at else float("inf")
    if state == OPEN:
        if elapsed < settings.cooldown_seconds:
            return BreakerVerdict(
                BreakerVerdict.WAIT, settings.cooldown_seconds - elapsed, "circuit_open"
            )
        return BreakerVerdict(BreakerVerdict.PROBE, reason="cool-down over")
    if state == HALF_OPEN:
        if elapsed >= settings.probe_timeout_seconds:
            return BreakerVerdict(BreakerVerdict.PROBE, reason="previous probe never reported")
        return BreakerVerdict(BreakerVerdict.WAIT, SHORT_WAIT_SECONDS, "circuit_half_open")
    if draw >= ramp_share(seconds_since_closed=elapsed, settings=settings):
        return BreakerVerdict(BreakerVerdict.WAIT, SHORT_WAIT_SECONDS, "circuit_ramp")
    return BreakerVerdict(BreakerVerdict.SEND)


def after_attempt(
    *, state: str, succeeded: bool, total: int, failed: int, settings: BreakerSettings
) -> str | None:
    """The breaker's next state after an attempt's outcome, or None when it stays.

    `total`/`failed` count the closed circuit's window including this attempt. Any result
    that arrives while half-open decides (normally the probe's).
    """
    if state == HALF_OPEN:
        return CLOSED if succeeded else OPEN
    if (
        state == CLOSED
        and not succeeded
        and should_open(total=total, failed=failed, settings=settings)
    ):
        return OPEN
    return None
