"""Read-only queries behind the admin dashboard: time series bucketed in the database.

Bucketing is a ``CASE`` over the bucket boundaries, so the grouping happens in SQL on
PostgreSQL and SQLite alike; percentiles use PostgreSQL's ``percentile_cont`` and fall back
to Python on other databases (the embedded SQLite default).
"""

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from django.apps import apps
from django.db import connection
from django.db.models import (
    Aggregate,
    Case,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    IntegerField,
    Min,
    Q,
    QuerySet,
    Value,
    When,
)
from django.utils import timezone

from deliveries.models import Attempt, Delivery, DeliveryStatus, Endpoint, EndpointState

PERCENTILES = (0.5, 0.95, 0.99)
PYTHON_PERCENTILE_SAMPLE = 50_000
QUEUE_AGE_BANDS = (
    ("< 1 min", timedelta(minutes=1)),
    ("1-5 min", timedelta(minutes=5)),
    ("5-15 min", timedelta(minutes=15)),
    ("15-60 min", timedelta(hours=1)),
    ("1-6 h", timedelta(hours=6)),
    ("> 6 h", None),
)


@dataclass(frozen=True)
class Window:
    key: str
    label: str
    span: timedelta
    bucket: timedelta
    label_format: str

    @property
    def buckets(self) -> int:
        return int(self.span / self.bucket)


WINDOWS = {
    "1h": Window("1h", "last hour", timedelta(hours=1), timedelta(minutes=5), "%H:%M"),
    "24h": Window("24h", "last 24 hours", timedelta(hours=24), timedelta(hours=1), "%H:00"),
}


class Percentile(Aggregate):
    function = "PERCENTILE_CONT"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression: Any, fraction: float, **extra: Any) -> None:
        super().__init__(expression, fraction=float(fraction), **extra)


@dataclass
class DashboardData:
    window: Window
    labels: list[str]
    attempts_ok: list[float]
    attempts_failed: list[float]
    success_rate: list[float | None]
    latency: dict[float, list[float | None]]
    dead_lettered: list[float]
    inbox_ok: list[float]
    inbox_failed: list[float]
    inbox_waiting: list[float]
    queue_age: list[tuple[str, float]]
    top_failing: list[tuple[str, float]]
    totals: dict[str, Any] = field(default_factory=dict)


def _bucket_of(column: str, start: datetime, window: Window) -> Case:
    whens = [
        When(**{f"{column}__lt": start + window.bucket * (i + 1)}, then=Value(i))
        for i in range(window.buckets)
    ]
    return Case(*whens, default=Value(window.buckets - 1), output_field=IntegerField())


def _series(rows: Iterable[Mapping[str, Any]], key: str, size: int) -> list[float]:
    values = [0.0] * size
    for row in rows:
        values[row["bucket"]] = float(row[key] or 0)
    return values


def _latency_percentiles(
    deliveries: QuerySet[Delivery], start: datetime, window: Window
) -> dict[float, list[float | None]]:
    latency = ExpressionWrapper(F("completed_at") - F("event__created_at"), DurationField())
    result: dict[float, list[float | None]] = {p: [None] * window.buckets for p in PERCENTILES}
    grouped = deliveries.annotate(bucket=_bucket_of("completed_at", start, window)).values("bucket")
    if connection.vendor == "postgresql":
        aggregates = {
            f"p{int(p * 100)}": Percentile(latency, p, output_field=DurationField())
            for p in PERCENTILES
        }
        rows = cast(Iterable[Mapping[str, Any]], grouped.annotate(**aggregates).order_by())
        for row in rows:
            for p in PERCENTILES:
                value = row[f"p{int(p * 100)}"]
                result[p][row["bucket"]] = value.total_seconds() if value else None
        return result
    samples: dict[int, list[float]] = {}
    for row in grouped.annotate(latency=latency)[:PYTHON_PERCENTILE_SAMPLE]:
        samples.setdefault(row["bucket"], []).append(row["latency"].total_seconds())
    for bucket, values in samples.items():
        cuts = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else []
        for p in PERCENTILES:
            result[p][bucket] = cuts[int(p * 100) - 1] if cuts else values[0]
    return result


def dashboard_data(window: Window, now: datetime | None = None) -> DashboardData:
    now = now or timezone.now()
    start = now - window.span
    size = window.buckets
    labels = [
        timezone.localtime(start + window.bucket * (i + 1)).strftime(window.label_format)
        for i in range(size)
    ]

    ok = Q(response_status__gte=200, response_status__lt=300)
    attempts = list(
        Attempt.objects.filter(started_at__gte=start)
        .annotate(bucket=_bucket_of("started_at", start, window))
        .values("bucket")
        .annotate(total=Count("id"), ok=Count("id", filter=ok))
        .order_by()
    )
    totals_per_bucket = _series(attempts, "total", size)
    attempts_ok = _series(attempts, "ok", size)
    attempts_failed = [t - o for t, o in zip(totals_per_bucket, attempts_ok, strict=True)]
    success_rate: list[float | None] = [
        100.0 * o / t if t else None for o, t in zip(attempts_ok, totals_per_bucket, strict=True)
    ]

    delivered = Delivery.objects.filter(
        status=DeliveryStatus.SUCCEEDED,
        completed_at__gte=start,
        is_replay=False,
        attempts_before_cycle=0,
    )
    latency = _latency_percentiles(delivered, start, window)

    dead = (
        Delivery.objects.filter(status=DeliveryStatus.DEAD_LETTERED, completed_at__gte=start)
        .annotate(bucket=_bucket_of("completed_at", start, window))
        .values("bucket")
        .annotate(n=Count("id"))
        .order_by()
    )

    inbox, inbox_failed = _inbox(start, window)

    waiting = Delivery.objects.filter(status__in=[DeliveryStatus.PENDING, DeliveryStatus.SENDING])
    age_whens = []
    for label, limit in QUEUE_AGE_BANDS:
        if limit is not None:
            age_whens.append(When(created_at__gt=now - limit, then=Value(label)))
    bands = dict(
        waiting.annotate(band=Case(*age_whens, default=Value(QUEUE_AGE_BANDS[-1][0])))
        .values_list("band")
        .annotate(n=Count("id"))
        .order_by()
    )
    queue_age = [(label, float(bands.get(label, 0))) for label, _ in QUEUE_AGE_BANDS]

    failing = (
        Attempt.objects.filter(started_at__gte=start)
        .exclude(ok)
        .values("delivery__endpoint_id", "delivery__endpoint__url")
        .annotate(n=Count("id"))
        .order_by("-n")[:8]
    )
    top_failing = [(row["delivery__endpoint__url"], float(row["n"])) for row in failing]

    oldest = waiting.aggregate(oldest=Min("created_at"))["oldest"]
    totals = {
        "attempts": int(sum(totals_per_bucket)),
        "success_rate": (
            round(100.0 * sum(attempts_ok) / sum(totals_per_bucket), 1)
            if sum(totals_per_bucket)
            else None
        ),
        "dead_letter_size": Delivery.objects.filter(status=DeliveryStatus.DEAD_LETTERED).count(),
        "pending": waiting.count(),
        "oldest_pending_seconds": int((now - oldest).total_seconds()) if oldest else 0,
        "suspended_endpoints": Endpoint.objects.filter(state=EndpointState.SUSPENDED).count(),
        "inbox_failed": inbox_failed,
    }
    return DashboardData(
        window=window,
        labels=labels,
        attempts_ok=attempts_ok,
        attempts_failed=attempts_failed,
        success_rate=success_rate,
        latency=latency,
        dead_lettered=_series(dead, "n", size),
        inbox_ok=_series(inbox, "ok", size),
        inbox_failed=_series(inbox, "failed", size),
        inbox_waiting=_series(inbox, "waiting", size),
        queue_age=queue_age,
        top_failing=top_failing,
        totals=totals,
    )


def _inbox(start: datetime, window: Window) -> tuple[list[Any], int | None]:
    """The receiving side's rows per bucket and its failed count, where it is installed
    (the dashboard is the one page of both sides); ``([], None)`` in a sending-only host."""
    if not apps.is_installed("receivers"):
        return [], None
    from receivers.models import InboxEvent, InboxStatus

    rows = list(
        InboxEvent.objects.filter(received_at__gte=start)
        .annotate(bucket=_bucket_of("received_at", start, window))
        .values("bucket")
        .annotate(
            ok=Count("id", filter=Q(status__in=[InboxStatus.PROCESSED, InboxStatus.IGNORED])),
            failed=Count("id", filter=Q(status__in=[InboxStatus.FAILED, InboxStatus.RETRYING])),
            waiting=Count(
                "id", filter=Q(status__in=[InboxStatus.RECEIVED, InboxStatus.PROCESSING])
            ),
        )
        .order_by()
    )
    return rows, InboxEvent.objects.filter(status=InboxStatus.FAILED).count()
