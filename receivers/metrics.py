"""Counters of the receiving side (Prometheus client, exported wherever the project
exposes its registry). Labels are bounded: source slugs and fixed outcome names only."""

from prometheus_client import Counter

requests_total = Counter(
    "receivers_requests_total",
    "Inbound webhook requests by outcome",
    ["source", "outcome"],
)
processing_total = Counter(
    "receivers_processing_total",
    "Inbox processing runs by outcome",
    ["source", "outcome"],
)


class RequestOutcome:
    """What the receiving view did with a request; also its log message."""

    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    IGNORED = "ignored"  # wrong account or mode: stored, never processed
    NOT_FOUND = "not_found"
    TOO_LARGE = "too_large"
    SIGNATURE_FAILED = "signature_failed"
    REPLAY_REJECTED = "replay_rejected"
    MALFORMED = "malformed"
    DB_UNAVAILABLE = "db_unavailable"


def count_request(source: str, outcome: str) -> None:
    requests_total.labels(source=source, outcome=outcome).inc()


def count_processing(source: str, outcome: str) -> None:
    processing_total.labels(source=source, outcome=outcome).inc()
