"""Counters of the receiving side (Prometheus client, exported wherever the project
exposes its registry). Labels are bounded: source slugs and fixed outcome names only."""

from datetime import datetime

from django.utils import timezone
from prometheus_client import Counter, Histogram

requests_total = Counter(
    "receivers_requests_total",
    "Inbound webhook requests by outcome",
    ["source", "outcome"],
)
#: The same requests by the source's scheme (provider), so one provider's trouble shows
#: across its sources; unknown sources count under "-".
scheme_requests_total = Counter(
    "receivers_scheme_requests_total",
    "Inbound webhook requests by scheme and outcome",
    ["scheme", "outcome"],
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
    CHALLENGE = "challenge"  # a provider's verification request, answered, not stored
    MALFORMED = "malformed"
    DB_UNAVAILABLE = "db_unavailable"
    SCHEME_MISSING = "scheme_missing"  # the source's scheme is not registered: 503


def count_request(source: str, outcome: str, scheme: str = "-") -> None:
    requests_total.labels(source=source, outcome=outcome).inc()
    scheme_requests_total.labels(scheme=scheme, outcome=outcome).inc()


def count_processing(source: str, outcome: str) -> None:
    processing_total.labels(source=source, outcome=outcome).inc()


# Latency of the receiving side. Buckets span a provider's immediate delivery to
# its redeliveries hours later.
LATENCY_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600)
processing_latency_seconds = Histogram(
    "receivers_processing_latency_seconds",
    "From the inbox row's arrival to its successful processing",
    ["source"],
    buckets=LATENCY_BUCKETS,
)
delivery_lag_seconds = Histogram(
    "receivers_delivery_lag_seconds",
    "Arrival time minus the provider's signed timestamp, for new inbox rows",
    ["source"],
    buckets=LATENCY_BUCKETS,
)


def observe_processing_latency(source: str, received_at: datetime) -> None:
    seconds = (timezone.now() - received_at).total_seconds()
    processing_latency_seconds.labels(source=source).observe(max(seconds, 0.0))


def observe_delivery_lag(source: str, provider_timestamp: datetime | None) -> None:
    if provider_timestamp is not None:
        seconds = (timezone.now() - provider_timestamp).total_seconds()
        delivery_lag_seconds.labels(source=source).observe(max(seconds, 0.0))
