"""When failures suspend an endpoint: the pure rule, no I/O."""

from datetime import datetime


def should_suspend(
    *,
    consecutive_failures: int,
    failing_since: datetime | None,
    now: datetime,
    threshold: int,
    window_seconds: float,
) -> bool:
    """True after `threshold` failures in a row that span at least `window_seconds`."""
    if threshold <= 0 or failing_since is None or consecutive_failures < threshold:
        return False
    return (now - failing_since).total_seconds() >= window_seconds
