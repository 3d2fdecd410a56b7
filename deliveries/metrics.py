"""Prometheus counters and histograms of the sending side.

They are incremented in Celery workers; with ``PROMETHEUS_MULTIPROC_DIR`` set (before the
process starts) every process writes its values to files there and ``/metrics`` adds them
up, so prefork workers and several gunicorn processes report one truth. Gauges that
describe the database are not kept here: ``deliveries.gauges`` computes them at
scrape time. Labels are bounded: endpoint ids and fixed names only.
"""

from prometheus_client import Counter, Gauge, Histogram

# Where scrape-time collectors go (webhooks_core.web.metrics); importable from here as before.
from webhooks_core.web.metrics import SCRAPE_TIME_REGISTRY as SCRAPE_TIME_REGISTRY

deliveries_total = Counter(
    "webhooks_deliveries_total",
    "Deliveries that reached a final outcome (succeeded, dead_lettered), by endpoint",
    ["endpoint", "outcome"],
)
attempts_total = Counter(
    "webhooks_attempts_total",
    "HTTP attempts by status class (2xx, 3xx, 4xx, 5xx, error for no response)",
    ["status_class"],
)
delivery_latency_seconds = Histogram(
    "webhooks_delivery_latency_seconds",
    "From the event's commit to its successful delivery",
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600),
)
attempt_duration_seconds = Histogram(
    "webhooks_attempt_duration_seconds",
    "Duration of one HTTP attempt, connect to last byte read",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)

# The sending engine (pipeline.owner): who works which endpoint, and what wakes them.
owners_working = Gauge(
    "webhooks_owners_working",
    "Endpoints whose owner is working in this process",
    multiprocess_mode="livesum",
)
lanes_busy = Gauge(
    "webhooks_lanes_busy",
    "Requests open in this process (lanes of the owners working here)",
    multiprocess_mode="livesum",
)
wakes_total = Counter(
    "webhooks_wakes_total",
    "Wakes of endpoints: dispatched as a task message, or folded into one already out "
    "(or into a working owner's next look)",
    ["result"],
)
deliveries_per_wake = Histogram(
    "webhooks_deliveries_per_wake",
    "Deliveries an owner sent between taking an endpoint and handing it back",
    buckets=(0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000),
)

FINAL_OUTCOMES = ("succeeded", "dead_lettered")


def status_class(status_code: int | None) -> str:
    if status_code is None:
        return "error"
    return f"{status_code // 100}xx" if 100 <= status_code <= 599 else "other"


def forget_endpoints(endpoint_ids: list[str]) -> None:
    """Drop these endpoints' series from this process's registry (an erasure). Other
    processes' values, and the multiprocess files, are hidden at scrape time instead
    (`gauges.live_endpoints`)."""
    for endpoint_id in endpoint_ids:
        for outcome in FINAL_OUTCOMES:
            try:
                deliveries_total.remove(endpoint_id, outcome)
            except KeyError:
                continue


# Documented on the metrics page; counted by the HTTP client (`http_client.transport`).
SSRF_REFUSALS = Counter(
    "webhooks_ssrf_refusals_total",
    "Requests refused at connect time because the URL's address is not allowed.",
)
DELIVERIES_DEFERRED = Counter(
    "webhooks_deliveries_deferred_total",
    "Delivery attempts put off without spending an attempt, by reason.",
    ["reason"],
)
ENDPOINTS_AUTO_SUSPENDED = Counter(
    "webhooks_endpoints_auto_suspended_total",
    "Endpoints suspended automatically after repeated failures.",
)
