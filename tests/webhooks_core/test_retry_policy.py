"""The retry policy: pure logic, checked with a seeded random generator."""

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhooks_core.retry_policy import (
    Decision,
    RetryPolicy,
    Verdict,
    backoff_delay,
    decide,
    parse_retry_after,
)

NOW = datetime(2026, 4, 15, 10, 0, 0, tzinfo=UTC)
POLICY = RetryPolicy(
    max_attempts=12,
    base_backoff_seconds=10.0,
    max_backoff_seconds=900.0,
    retry_window_seconds=24 * 3600.0,
)


def run(
    status_code: int | None,
    *,
    attempt: int = 1,
    retry_after: str | None = None,
    policy: RetryPolicy = POLICY,
    first_attempt_at: datetime = NOW,
    now: datetime = NOW,
    seed: int = 1,
) -> Decision:
    return decide(
        policy=policy,
        attempt_number=attempt,
        status_code=status_code,
        retry_after=retry_after,
        first_attempt_at=first_attempt_at,
        now=now,
        rng=random.Random(seed),
    )


def test_defaults_match_the_issue() -> None:
    policy = RetryPolicy()
    assert policy.max_attempts == 12
    assert policy.base_backoff_seconds == 10.0
    assert policy.max_backoff_seconds == 900.0
    assert policy.retry_window_seconds == 24 * 3600.0


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_2xx_succeeds(status: int) -> None:
    decision = run(status)
    assert decision.verdict == Verdict.SUCCEEDED
    assert not decision.suspend_endpoint


def test_2xx_succeeds_even_on_the_last_attempt() -> None:
    assert run(200, attempt=12).verdict == Verdict.SUCCEEDED


@pytest.mark.parametrize(("status", "suspend"), [(401, False), (403, False), (410, True)])
def test_401_403_410_dead_letter_at_once(status: int, suspend: bool) -> None:
    decision = run(status, attempt=1)
    assert decision.verdict == Verdict.DEAD_LETTER
    assert decision.suspend_endpoint is suspend
    assert str(status) in decision.reason


@pytest.mark.parametrize(
    "status", [None, 100, 301, 302, 400, 404, 408, 409, 422, 429, 500, 502, 503, 504, 599]
)
def test_everything_else_retries(status: int | None) -> None:
    decision = run(status, attempt=1)
    assert decision.verdict == Verdict.RETRY
    assert not decision.suspend_endpoint
    assert 10.0 <= decision.delay_seconds <= 20.0


@pytest.mark.parametrize("attempt", range(1, 12))
@pytest.mark.parametrize("seed", [0, 1, 2, 42, 1234])
def test_backoff_within_the_jitter_band_and_capped(attempt: int, seed: int) -> None:
    decision = run(500, attempt=attempt, seed=seed)
    assert decision.verdict == Verdict.RETRY
    low = 10.0 * 2 ** (attempt - 1)
    high = low + 10.0
    assert min(low, 900.0) <= decision.delay_seconds <= min(high, 900.0)


def test_backoff_is_the_documented_formula_with_the_given_rng() -> None:
    for attempt in range(1, 8):
        expected_jitter = random.Random(7).uniform(0, 10.0)
        got = backoff_delay(attempt, POLICY, random.Random(7))
        assert got == pytest.approx(min(10.0 * 2 ** (attempt - 1) + expected_jitter, 900.0))


def test_backoff_jitter_spreads_retries() -> None:
    rng = random.Random(99)
    delays = {round(backoff_delay(3, POLICY, rng), 6) for _ in range(100)}
    assert len(delays) > 90
    assert min(delays) >= 40.0
    assert max(delays) <= 50.0


def test_backoff_of_huge_attempt_numbers_is_capped_without_overflow() -> None:
    assert backoff_delay(10_000, POLICY, random.Random(1)) == 900.0


def test_delay_grows_then_stays_at_the_cap() -> None:
    delays = [run(503, attempt=n, seed=3).delay_seconds for n in range(1, 12)]
    assert delays[:6] == sorted(delays[:6])
    assert all(d == 900.0 for d in delays[7:])


# --- Retry-After -----------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_seconds_is_honoured_on_429_and_503(status: int) -> None:
    decision = run(status, retry_after="120")
    assert decision.verdict == Verdict.RETRY
    assert decision.delay_seconds == 120.0


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_http_date_is_honoured(status: int) -> None:
    when = format_datetime(NOW + timedelta(seconds=300), usegmt=True)
    decision = run(status, retry_after=when)
    assert decision.verdict == Verdict.RETRY
    assert decision.delay_seconds == pytest.approx(300.0)


@pytest.mark.parametrize("value", ["86400", format_datetime(NOW + timedelta(days=2), usegmt=True)])
def test_retry_after_is_capped_at_the_max_backoff(value: str) -> None:
    decision = run(429, retry_after=value)
    assert decision.verdict == Verdict.RETRY
    assert decision.delay_seconds == 900.0


def test_retry_after_in_the_past_means_now() -> None:
    past = format_datetime(NOW - timedelta(minutes=5), usegmt=True)
    assert run(503, retry_after=past).delay_seconds == 0.0


@pytest.mark.parametrize("status", [500, 502, 504, 400, None])
def test_retry_after_is_ignored_on_other_statuses(status: int | None) -> None:
    decision = run(status, retry_after="600", attempt=1)
    assert decision.verdict == Verdict.RETRY
    assert 10.0 <= decision.delay_seconds <= 20.0


@pytest.mark.parametrize(
    "value", ["", "   ", "soon", "-5", "1.5", "²", "Mon, 99 Foo 2026 99:99:99 GMT", "\x00"]
)
def test_unusable_retry_after_falls_back_to_backoff(value: str) -> None:
    decision = run(429, retry_after=value, attempt=2)
    assert decision.verdict == Verdict.RETRY
    assert 20.0 <= decision.delay_seconds <= 30.0


def test_parse_retry_after() -> None:
    assert parse_retry_after(None, NOW) is None
    assert parse_retry_after("0", NOW) == 0.0
    assert parse_retry_after(" 30 ", NOW) == 30.0
    assert parse_retry_after("Wed, 15 Apr 2026 10:01:00 GMT", NOW) == 60.0
    assert parse_retry_after("²", NOW) is None
    assert parse_retry_after("not a date", NOW) is None


ABSURD = [
    "Mon, 1 Jan 99999999999 00:00:00 GMT",
    "9" * 4000,
    str(10**400),
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e400",
    "-1",
    "-99999999999999999999",
    "Mon, 1 Jan -5 00:00:00 GMT",
    "\udcff",
]

# Header-shaped values a receiver could send: HTTP dates with any year, day, time and zone,
# whole numbers of any size and sign, and anything else.
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
http_dates = st.builds(
    "{}, {} {} {} {:02}:{:02}:{:02} {}".format,
    st.sampled_from(["Mon", "Tue", "Sun", "Xyz"]),
    st.integers(-(10**12), 10**12),
    st.sampled_from([*_MONTHS, "Foo"]),
    st.integers(-(10**20), 10**20),
    st.integers(-1, 99),
    st.integers(-1, 99),
    st.integers(-1, 99),
    st.one_of(
        st.sampled_from(["GMT", "UTC", "-0000", "+2359", "-2359", "EST", ""]),
        st.integers(-999999, 999999).map("{:+05d}".format),
    ),
)
retry_after_values = st.one_of(
    st.sampled_from(ABSURD),
    http_dates,
    st.integers(-(10**30), 10**1000).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.text(),
)
nows = st.sampled_from(
    [NOW, datetime(1, 1, 2, tzinfo=UTC), datetime(9999, 12, 30, tzinfo=UTC), datetime.now(UTC)]
)


@given(value=retry_after_values, now=nows)
def test_no_retry_after_value_raises_out_of_the_parser(value: str, now: datetime) -> None:
    seconds = parse_retry_after(value, now)
    assert seconds is None or 0.0 <= seconds <= timedelta.max.total_seconds()


@given(
    value=retry_after_values,
    now=nows,
    status=st.sampled_from([429, 503]),
    attempt=st.integers(1, 11),
)
def test_any_retry_after_retries_within_the_backoff_cap(
    value: str, now: datetime, status: int, attempt: int
) -> None:
    decision = run(status, retry_after=value, attempt=attempt, now=now, first_attempt_at=now)
    assert decision.verdict == Verdict.RETRY
    assert 0.0 <= decision.delay_seconds <= POLICY.max_backoff_seconds
    # A due time can be computed from it.
    assert now + timedelta(seconds=decision.delay_seconds) >= now


@pytest.mark.parametrize("value", ABSURD)
def test_a_retry_after_no_calendar_holds_falls_back_to_the_backoff(value: str) -> None:
    assert parse_retry_after(value, NOW) is None
    decision = run(503, retry_after=value, attempt=2, seed=5)
    assert decision == run(500, attempt=2, seed=5)
    assert 20.0 <= decision.delay_seconds <= 30.0


def test_retry_after_never_makes_a_retry_out_of_a_dead_letter() -> None:
    assert run(429, retry_after="1", attempt=12).verdict == Verdict.DEAD_LETTER


# --- stop conditions -------------------------------------------------------------------


def test_exhaustion_after_max_attempts() -> None:
    policy = RetryPolicy(max_attempts=3, base_backoff_seconds=1, max_backoff_seconds=10)
    assert run(500, attempt=1, policy=policy).verdict == Verdict.RETRY
    assert run(500, attempt=2, policy=policy).verdict == Verdict.RETRY
    last = run(500, attempt=3, policy=policy)
    assert last.verdict == Verdict.DEAD_LETTER
    assert "3 attempts" in last.reason
    assert run(None, attempt=4, policy=policy).verdict == Verdict.DEAD_LETTER


def test_single_attempt_policy_never_retries() -> None:
    policy = RetryPolicy(max_attempts=1)
    assert run(None, attempt=1, policy=policy).verdict == Verdict.DEAD_LETTER


def test_retry_window_passed_dead_letters() -> None:
    first = NOW - timedelta(hours=24, seconds=1)
    decision = run(500, attempt=3, first_attempt_at=first)
    assert decision.verdict == Verdict.DEAD_LETTER
    assert "window" in decision.reason


def test_retry_that_would_land_after_the_window_dead_letters() -> None:
    # 5 s left in the window, the next try would be at least 10 s away.
    first = NOW - timedelta(hours=24) + timedelta(seconds=5)
    assert run(500, attempt=1, first_attempt_at=first).verdict == Verdict.DEAD_LETTER


def test_retry_inside_the_window_goes_on() -> None:
    first = NOW - timedelta(hours=23)
    assert run(500, attempt=5, first_attempt_at=first).verdict == Verdict.RETRY


def test_short_window_policy() -> None:
    policy = RetryPolicy(
        max_attempts=100, base_backoff_seconds=1, max_backoff_seconds=5, retry_window_seconds=10
    )
    assert run(500, attempt=1, policy=policy).verdict == Verdict.RETRY
    late = run(500, attempt=2, policy=policy, first_attempt_at=NOW - timedelta(seconds=9))
    assert late.verdict == Verdict.DEAD_LETTER


def test_decide_is_deterministic_with_a_seeded_rng() -> None:
    assert run(500, attempt=4, seed=5) == run(500, attempt=4, seed=5)
