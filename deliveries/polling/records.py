"""What a poll leaves behind: a `PollRecord` per poll that handed out messages (the
polling endpoint's counterpart of an `Attempt`, one row per poll rather than one per
message: a page of 250 is one act of the consumer), Prometheus counters, and the lag of
each consumer group as a gauge computed when ``/metrics`` is scraped."""

from collections.abc import Iterator

from django.db import DatabaseError
from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from deliveries.models import Endpoint, PollConsumer, PollRecord
from deliveries.polling import feed
from deliveries.polling.positions import Position

polls_total = Counter(
    "webhooks_polls_total",
    "Reads of a polling endpoint's (or a catch-up) feed, by endpoint and whether they "
    "handed out messages",
    ["endpoint", "result"],
)
poll_messages_total = Counter(
    "webhooks_poll_messages_total",
    "Messages handed out to consumers, by endpoint",
    ["endpoint"],
)


def poll_record(
    *, endpoint: Endpoint, consumer: str, count: int, iterator: str, next_iterator: str
) -> None:
    """Count a poll; record it when it handed out messages."""
    label = str(endpoint.pk)
    polls_total.labels(label, "messages" if count else "empty").inc()
    if not count:
        return
    poll_messages_total.labels(label).inc(count)
    PollRecord.objects.create(
        endpoint=endpoint,
        consumer=consumer,
        count=count,
        iterator=iterator,
        next_iterator=next_iterator,
    )


class LagCollector(Collector):
    """``webhooks_poll_consumer_lag``: messages after each consumer group's committed
    position, by endpoint and group (one counting query per group)."""

    def __init__(self, tenant: str | None = None) -> None:
        self.tenant = tenant

    def collect(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            "webhooks_poll_consumer_lag",
            "Messages after a consumer group's committed position",
            labels=["endpoint", "consumer"],
        )
        consumers = PollConsumer.objects.all()
        if self.tenant is not None:
            consumers = consumers.filter(endpoint__tenant=self.tenant)
        try:
            for consumer in consumers.only("endpoint_id", "name", "committed_xid", "committed_id"):
                position = Position(consumer.committed_xid, consumer.committed_id)
                lag.add_metric(
                    [str(consumer.endpoint_id), consumer.name],
                    feed.count_after(consumer.endpoint_id, position),
                )
        except DatabaseError:
            return
        yield lag


def collector(tenant: str | None) -> Collector:
    return LagCollector(tenant)
