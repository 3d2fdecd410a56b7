"""Prometheus metrics of endpoint health, for a /metrics view to expose.

Counters count what this process did. The breaker's current state is read from PostgreSQL
when metrics are collected, so every process reports the same, true figure; its collector
is in ``webhooks_core.web.metrics.SCRAPE_TIME_REGISTRY``, which the view serves in both modes.
"""

from collections.abc import Iterator

from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from webhooks_core.web.metrics import SCRAPE_TIME_REGISTRY

CIRCUIT_TRANSITIONS = Counter(
    "webhooks_circuit_transitions_total",
    "Circuit breaker transitions of endpoints, by the state entered.",
    ["to_state"],
)


class CircuitStateCollector(Collector):
    """`webhooks_endpoints_by_circuit_state{state}` and, for endpoints whose circuit is not
    closed (few by nature), `webhooks_endpoint_circuit_open{endpoint,state}`."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from django.db import DatabaseError
        from django.db.models import Count

        from deliveries.models import CircuitState, Endpoint

        by_state = GaugeMetricFamily(
            "webhooks_endpoints_by_circuit_state",
            "Endpoints per circuit breaker state.",
            labels=["state"],
        )
        not_closed = GaugeMetricFamily(
            "webhooks_endpoint_circuit_open",
            "1 for each endpoint whose circuit breaker is open or half-open.",
            labels=["endpoint", "state"],
        )
        try:
            counts = dict(
                Endpoint.objects.values_list("circuit_state").annotate(n=Count("id")).order_by()
            )
            tripped = list(
                Endpoint.objects.exclude(circuit_state=CircuitState.CLOSED).values_list(
                    "id", "circuit_state"
                )[:1000]
            )
        except DatabaseError:
            return
        for state in CircuitState.values:
            by_state.add_metric([state], counts.get(state, 0))
        for endpoint_id, state in tripped:
            not_closed.add_metric([str(endpoint_id), state], 1)
        yield by_state
        yield not_closed

    def describe(self) -> Iterator[GaugeMetricFamily]:
        # Described without collecting, so registering does not query the database.
        return iter(())


_collector = CircuitStateCollector()
SCRAPE_TIME_REGISTRY.register(_collector)
