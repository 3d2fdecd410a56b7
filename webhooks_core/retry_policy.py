"""When to retry, when to give up. Written once, used by every delivery.

Why these rules:

* 2xx means the endpoint has the event: done.
* 401 and 403 mean the endpoint rejects us (wrong secret, revoked access); retrying only
  hammers it, so the delivery goes to the dead-letter queue at once for an operator.
* 410 Gone is the endpoint saying "stop sending": dead-letter and suspend the endpoint.
* Everything else, timeouts and network errors are assumed transient and retried with
  exponential backoff plus jitter, ``min(base * 2**(n-1) + uniform(0, base), max)``, so
  that an endpoint coming back from an outage is not hit by every sender at once.
* ``Retry-After`` on 429 and 503 is the endpoint telling us when it can take more; we honour
  it, but never beyond the endpoint's maximum backoff. It is data from the endpoint: a
  value we cannot read, or one that names a time no calendar holds, counts as absent (the
  backoff applies) and never raises.
* After ``max_attempts`` tries, or once the retry window since the first try has passed,
  the delivery is dead-lettered instead of retried for ever.
"""

import enum
import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

DEAD_LETTER_STATUSES = frozenset({401, 403, 410})
SUSPEND_STATUSES = frozenset({410})
RETRY_AFTER_STATUSES = frozenset({429, 503})
# The longest wait a due time can be computed from (`timedelta`'s range): an endpoint asking
# for more names no time we can hold.
_LONGEST_WAIT_SECONDS = timedelta.max.total_seconds()


class Verdict(enum.StrEnum):
    SUCCEEDED = "succeeded"
    RETRY = "retry"
    DEAD_LETTER = "dead_letter"


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 12
    base_backoff_seconds: float = 10.0
    max_backoff_seconds: float = 900.0
    retry_window_seconds: float = 24 * 3600.0


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    delay_seconds: float = 0.0
    suspend_endpoint: bool = False
    reason: str = ""


def backoff_delay(
    attempt_number: int, policy: RetryPolicy, rng: random.Random | None = None
) -> float:
    """Delay before the try after ``attempt_number`` (1-based), with jitter."""
    rand = rng or random
    base = policy.base_backoff_seconds
    exponential = base * 2 ** min(attempt_number - 1, 62)
    return min(exponential + rand.uniform(0, base), policy.max_backoff_seconds)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date), or
    None when there is none we can use: absent, unreadable, or a time no calendar holds (a
    year past 9999, more seconds than a `timedelta` holds)."""
    if not value:
        return None
    value = value.strip()
    # ASCII digits only: str.isdigit() also accepts characters float() refuses ("²").
    if value.isascii() and value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
            if when.tzinfo is None:
                return None
            seconds = (when - now).total_seconds()
        except (TypeError, ValueError, OverflowError):
            return None
    if not math.isfinite(seconds) or seconds > _LONGEST_WAIT_SECONDS:
        return None
    return max(seconds, 0.0)


def decide(
    *,
    policy: RetryPolicy,
    attempt_number: int,
    status_code: int | None,
    retry_after: str | None,
    first_attempt_at: datetime,
    now: datetime,
    rng: random.Random | None = None,
) -> Decision:
    """What to do after attempt ``attempt_number`` ended with ``status_code``.

    ``status_code`` is None for a timeout or a network error.
    """
    if status_code is not None and 200 <= status_code < 300:
        return Decision(Verdict.SUCCEEDED)
    if status_code in DEAD_LETTER_STATUSES:
        return Decision(
            Verdict.DEAD_LETTER,
            suspend_endpoint=status_code in SUSPEND_STATUSES,
            reason=f"endpoint answered {status_code}",
        )
    if attempt_number >= policy.max_attempts:
        return Decision(Verdict.DEAD_LETTER, reason=f"gave up after {attempt_number} attempts")
    delay = backoff_delay(attempt_number, policy, rng)
    if status_code in RETRY_AFTER_STATUSES:
        asked = parse_retry_after(retry_after, now)
        if asked is not None:
            delay = min(max(asked, 0.0), policy.max_backoff_seconds)
    elapsed = (now - first_attempt_at).total_seconds()
    if elapsed + delay > policy.retry_window_seconds:
        return Decision(Verdict.DEAD_LETTER, reason="retry window exhausted")
    return Decision(Verdict.RETRY, delay_seconds=delay)
