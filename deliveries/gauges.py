"""The sending side's gauges, computed from PostgreSQL when ``/metrics`` is scraped
(registered with ``webhooks_core.web.metrics`` in ``DeliveriesConfig.ready()``)."""

import uuid
from collections.abc import Iterator

from django.db import DatabaseError
from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from deliveries.models import Delivery, DeliveryStatus, Endpoint, EndpointState

WAITING_DELIVERIES = (DeliveryStatus.PENDING, DeliveryStatus.SENDING)


class DatabaseCollector(Collector):
    """Gauges computed from PostgreSQL at scrape time (a few indexed aggregate queries).

    With a ``tenant``, only the delivery and endpoint gauges, of that tenant's endpoints.
    """

    def __init__(self, tenant: str | None = None) -> None:
        self.tenant = tenant

    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        deliveries = Delivery.objects.all()
        endpoint_rows = Endpoint.objects.all()
        if self.tenant is not None:
            deliveries = deliveries.filter(endpoint__tenant=self.tenant)
            endpoint_rows = endpoint_rows.filter(tenant=self.tenant)
        by_status = GaugeMetricFamily(
            "webhooks_deliveries", "Deliveries by current status", labels=["status"]
        )
        counts = dict(deliveries.values_list("status").annotate(n=Count("id")).order_by())
        for status in DeliveryStatus.values:
            by_status.add_metric([status], counts.get(status, 0))
        yield by_status
        yield GaugeMetricFamily(
            "webhooks_dead_letter_size",
            "Dead-lettered deliveries (the dead-letter queue)",
            value=counts.get(DeliveryStatus.DEAD_LETTERED, 0),
        )
        oldest = deliveries.filter(status__in=WAITING_DELIVERIES).aggregate(
            oldest=Min("created_at")
        )["oldest"]
        yield GaugeMetricFamily(
            "webhooks_oldest_pending_delivery_age_seconds",
            "Age of the oldest delivery still pending or sending (0 when none)",
            value=(now - oldest).total_seconds() if oldest else 0.0,
        )
        endpoints = GaugeMetricFamily("webhooks_endpoints", "Endpoints by state", labels=["state"])
        states = dict(endpoint_rows.values_list("state").annotate(n=Count("id")).order_by())
        for state in EndpointState.values:
            endpoints.add_metric([state], states.get(state, 0))
        yield endpoints
        yield GaugeMetricFamily(
            "webhooks_suspended_endpoints",
            "Endpoints suspended (automatically or by an operator)",
            value=states.get(EndpointState.SUSPENDED, 0),
        )


def collector(tenant: str | None) -> Collector:
    return DatabaseCollector(tenant)


def live_endpoints(values: set[str]) -> set[str]:
    """Of the endpoint ids the counters carry as labels, those still stored: an erased
    (or deleted) endpoint's series leave ``/metrics`` with it. When the database cannot
    say, none is shown rather than one that may have been erased."""
    ids = []
    for value in values:
        try:
            ids.append(uuid.UUID(value))
        except ValueError:
            continue
    try:
        stored = Endpoint.objects.filter(pk__in=ids).values_list("pk", flat=True)
        return {str(pk) for pk in stored}
    except DatabaseError:
        return set()
