"""Findings 2, 4 and 8 of the engine's review (issue #22), as their symptoms on the real
stack, and the engine's metrics by name."""

import threading
import time

import pytest
from django.db import connection, transaction
from prometheus_client import REGISTRY, generate_latest

from deliveries import metrics, services
from deliveries.models import Delivery, DeliveryStatus, Endpoint
from tests.conftest import wait_until
from tests.deliveries.helpers import (
    delivery_row,
    emit_and_wait_for_arrivals,
    max_in_any_window,
    owner_at_work,
    succeeded_count,
)
from tests.fixtures import make_endpoint
from tests.receiver import Receiver, Reply

pytestmark = pytest.mark.django_db(transaction=True)


def _pending_rows(endpoint: Endpoint, count: int) -> list[Delivery]:
    return [delivery_row(endpoint) for _ in range(count)]


def _published() -> float:
    return metrics.wakes_total.labels(result="dispatched")._value.get()


def _deduplicated() -> float:
    return metrics.wakes_total.labels(result="folded")._value.get()


def test_long_timeouts_claim_no_more_rows_than_free_lanes_and_dispatch_nothing(
    receiver: Receiver,
) -> None:
    # Finding 2: with connect + read timeout at least half the lease, a batch claimed 50
    # rows to send one and released 49, re-publishing itself each time.
    endpoint, _ = make_endpoint(
        receiver, max_in_flight=1, connect_timeout_seconds=5, read_timeout_seconds=15
    )
    receiver.default = Reply(delay_seconds=0.1)
    rows = _pending_rows(endpoint, 6)
    published = _published()
    most_sending = 0
    done = threading.Event()

    def watch() -> None:
        nonlocal most_sending
        try:
            while not done.is_set():
                sending = Delivery.objects.filter(
                    endpoint=endpoint, status=DeliveryStatus.SENDING
                ).count()
                most_sending = max(most_sending, sending)
                time.sleep(0.01)
        finally:
            connection.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = services.endpoint_work(endpoint_id=endpoint.pk)
    finally:
        done.set()
        watcher.join()

    assert result.sent == 6
    # The one open, and the one before it, recorded once the next has started.
    assert most_sending <= 2
    assert _published() == published  # one turn, no message of its own
    for row in rows:
        row.refresh_from_db()
        assert row.status == DeliveryStatus.SUCCEEDED
        assert row.attempts == 1  # no claim given back and taken again


def test_a_reply_that_timed_out_leaves_nothing_that_blocks_the_endpoint(
    celery_worker: object, receiver: Receiver
) -> None:
    # Finding 4: an in-flight slot taken while the reply timed out was never given back,
    # so the endpoint's next messages were dropped for the slot's lifetime (120 s), then
    # waited for the sweeper (another 120 s).
    endpoint, _ = make_endpoint(receiver, max_in_flight=1, read_timeout_seconds=0.5)
    receiver.script(Reply(delay_seconds=3))
    with transaction.atomic():
        for n in range(3):
            services.emit("order.created", {"n": n})

    wait_until(lambda: succeeded_count(endpoint) == 3, timeout=30, what="all three delivered")
    timed_out = Delivery.objects.filter(endpoint=endpoint, attempts=2)
    assert timed_out.count() == 1  # the one whose reply timed out, sent again


def test_every_request_takes_its_rate_limit_token_the_first_of_a_round_too(
    celery_worker: object, receiver: Receiver
) -> None:
    # Finding 8: the first request of each take-along round skipped the rate limiter.
    endpoint, _ = make_endpoint(receiver, max_in_flight=4, rate_limit_per_second=2)

    arrivals = emit_and_wait_for_arrivals(endpoint, receiver, 8)
    # 2 admitted in any 1 s (a moving window); arrivals lag admission by a few ms.
    assert max_in_any_window(arrivals, 0.75) <= 2


def test_the_engine_s_metrics_count_owners_lanes_wakes_and_deliveries_per_wake(
    receiver: Receiver,
) -> None:
    endpoint, _ = make_endpoint(receiver)
    receiver.default = Reply(delay_seconds=0.5)
    _pending_rows(endpoint, 2)
    owners, lanes = metrics.owners_working._value.get(), metrics.lanes_busy._value.get()
    turns = REGISTRY.get_sample_value("webhooks_deliveries_per_wake_count") or 0.0
    sent = REGISTRY.get_sample_value("webhooks_deliveries_per_wake_sum") or 0.0
    worker = owner_at_work(endpoint)
    wait_until(lambda: len(receiver.requests) == 2, what="both requests open")

    assert metrics.owners_working._value.get() == owners + 1
    assert metrics.lanes_busy._value.get() == lanes + 2
    # A wake while the owner works is folded into its next look.
    published, deduplicated = _published(), _deduplicated()
    services.wake_endpoints([endpoint.pk])
    assert (_published(), _deduplicated()) == (published, deduplicated + 1)

    worker.join(timeout=20)
    assert not worker.is_alive()
    assert metrics.owners_working._value.get() == owners
    assert metrics.lanes_busy._value.get() == lanes
    assert REGISTRY.get_sample_value("webhooks_deliveries_per_wake_count") == turns + 1
    assert REGISTRY.get_sample_value("webhooks_deliveries_per_wake_sum") == sent + 2
    exposed = generate_latest(REGISTRY).decode()
    for name in (
        "webhooks_owners_working ",
        "webhooks_lanes_busy ",
        'webhooks_wakes_total{result="dispatched"}',
        'webhooks_wakes_total{result="folded"}',
        "webhooks_deliveries_per_wake_bucket",
    ):
        assert name in exposed
