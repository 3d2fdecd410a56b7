"""The delivery worker as the Procfile runs it: Celery's gevent pool, with pooled
database connections. Hundreds of tasks at once in one process must keep every limit the
thread-pool worker keeps, and hold no more database connections than the pool allows."""

import threading
from typing import Any

import pytest
from django.db import connection, transaction

from deliveries import services
from deliveries.models import Endpoint
from tests.conftest import wait_until
from tests.deliveries.helpers import max_in_any_window, succeeded_count
from tests.fixtures import make_endpoint
from tests.helpers import worker_process
from tests.receiver import Receiver, Reply

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

POOL_SIZE = 3
APP_NAME = "webhooks-gevent-worker-test"


def worker_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [APP_NAME]
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def events_for_endpoints(
    receiver: Receiver, *, endpoints: int, max_in_flight: int, count: int, delay: float
) -> list[Endpoint]:
    """`count` events committed for `endpoints` new endpoints of a receiver that answers
    after `delay` seconds."""
    receiver.default = Reply(delay_seconds=delay)
    made = [make_endpoint(receiver, max_in_flight=max_in_flight)[0] for _ in range(endpoints)]
    with transaction.atomic():
        for n in range(count):
            services.emit("order.created", {"n": n})
    return made


def test_a_gevent_worker_sends_up_to_each_in_flight_limit_on_a_few_connections(
    receiver: Receiver, redis_client: Any
) -> None:
    redis_client.flushdb()
    count = 12
    endpoints = events_for_endpoints(receiver, endpoints=3, max_in_flight=3, count=count, delay=0.4)

    env = {"DATABASE_POOL_MAX_SIZE": str(POOL_SIZE), "PGAPPNAME": APP_NAME}
    most_connections = [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            most_connections[0] = max(most_connections[0], worker_connections())
        connection.close()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with worker_process(env, pool="gevent", concurrency=100):
            wait_until(
                lambda: all(succeeded_count(e) == count for e in endpoints),
                timeout=90,
                what="every delivery to every endpoint",
            )
    finally:
        stop.set()
        watcher.join()
    redis_client.flushdb()

    assert 0 < most_connections[0] <= POOL_SIZE
    arrivals = sorted(r.received_at for r in receiver.requests)
    assert len(arrivals) == count * len(endpoints)
    # Each request is open for 0.4 s. Three endpoints with three slots each: up to nine at
    # once, where the thread pool's four threads would allow four.
    assert 4 < max_in_any_window(arrivals, 0.3) <= 9


def test_owners_waiting_to_record_hold_no_connection_the_writer_needs(
    receiver: Receiver, redis_client: Any
) -> None:
    # Owners whose rounds end while another round is written wait for that writer (group
    # commit). Were they to wait holding their pooled connections, the one of this pool
    # could be held by a waiter while the writer, which had given its own back (its turn
    # ended: more endpoints than the pool's slots take turns), waited for one until the
    # pool gave up: a stall per round, as found in the benchmark.
    redis_client.flushdb()
    count = 30
    endpoints = events_for_endpoints(
        receiver, endpoints=12, max_in_flight=4, count=count, delay=0.05
    )
    env = {
        "DATABASE_POOL_MAX_SIZE": "1",
        "DATABASE_POOL_TIMEOUT": "120",
        "WEBHOOKS_DELIVERY_TURN_SECONDS": "0.02",
    }
    with worker_process(env, pool="gevent", concurrency=6):
        wait_until(
            lambda: all(succeeded_count(e) == count for e in endpoints),
            timeout=60,
            what="every delivery to every endpoint, without a stall",
        )
    redis_client.flushdb()
