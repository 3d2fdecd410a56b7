"""The replay window. Pure."""


def within_window(timestamp: int, now: float, tolerance_seconds: int) -> bool:
    """Whether a signed ``timestamp`` (unix seconds) is at most ``tolerance_seconds`` from
    ``now``, in either direction (a sender's clock may run a little ahead of ours)."""
    if tolerance_seconds < 0:
        return False
    return abs(now - timestamp) <= tolerance_seconds
