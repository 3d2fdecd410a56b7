"""The receiving side's gauges, computed from PostgreSQL when ``/metrics`` is scraped
(registered with ``webhooks_core.web.metrics`` in ``ReceiversConfig.ready()``). The inbox is not
per tenant: a scrape for one tenant has none of them."""

from collections.abc import Iterator

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from receivers.models import InboxEvent, InboxStatus

UNPROCESSED_INBOX = (InboxStatus.RECEIVED, InboxStatus.RETRYING, InboxStatus.PROCESSING)


class InboxCollector(Collector):
    """Inbox gauges (two indexed aggregate queries)."""

    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        inbox = GaugeMetricFamily(
            "receivers_inbox_events", "Inbox events by processing status", labels=["status"]
        )
        inbox_counts = dict(
            InboxEvent.objects.values_list("status").annotate(n=Count("id")).order_by()
        )
        for status in InboxStatus.values:
            inbox.add_metric([status], inbox_counts.get(status, 0))
        yield inbox
        oldest_inbox = InboxEvent.objects.filter(status__in=UNPROCESSED_INBOX).aggregate(
            oldest=Min("received_at")
        )["oldest"]
        yield GaugeMetricFamily(
            "receivers_oldest_unprocessed_age_seconds",
            "Age of the oldest inbox event not yet processed (0 when none)",
            value=(now - oldest_inbox).total_seconds() if oldest_inbox else 0.0,
        )


def collector(tenant: str | None) -> Collector | None:
    return InboxCollector() if tenant is None else None
