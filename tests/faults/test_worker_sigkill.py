"""Scenario 1: the Celery worker process is SIGKILLed three times during a 1,000-event run.

Each kill lands mid-run: requests in flight, leases held, messages unacknowledged. A fresh
worker and the sweeper (beat's job, here a thread) pick up what the dead one left.
"""

import os
import signal
import time
from typing import Any

import pytest
from django.db import transaction

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus
from tests.conftest import wait_until
from tests.faults.checks import (
    FAST_POLICY,
    assert_database_consistent,
    assert_each_arrived_with_its_id,
    delivery_statuses,
)
from tests.helpers import declare_queues, sweeping_in_background, worker_process
from tests.receiver import Receiver, Reply

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

EVENTS = 1000
KILL_WHEN_ARRIVED = (0.15, 0.4, 0.65)  # share of the events that have arrived
WORKER_ENV = {"WEBHOOKS_LEASE_SECONDS": "2"}


def distinct_arrivals(receiver: Receiver) -> int:
    return len({r.headers["X-Webhook-Id"] for r in list(receiver.requests)})


def test_worker_sigkilled_three_times_in_a_1000_event_run_loses_nothing(
    transactional_db: None, receiver: Receiver, fast_sweeps: None, redis_client: Any
) -> None:
    redis_client.flushdb()
    declare_queues()  # the events are emitted before any worker runs
    services.endpoint_create(url=receiver.url, event_types=["*"], **FAST_POLICY)
    receiver.default = Reply(delay_seconds=0.02)  # so that a kill finds requests in flight
    event_ids = []
    for _ in range(EVENTS // 100):
        with transaction.atomic():
            event_ids += [services.emit("order.created", {"n": n}).id for n in range(100)]

    started = time.monotonic()
    leases_left_by_kills = 0
    with sweeping_in_background():
        for share in KILL_WHEN_ARRIVED:
            with worker_process(WORKER_ENV) as doomed:
                wanted = share * EVENTS
                wait_until(
                    lambda: distinct_arrivals(receiver) >= wanted,  # noqa: B023
                    timeout=120,
                    what=f"{share:.0%} of the events to arrive",
                )
                os.kill(doomed.pid, signal.SIGKILL)
                doomed.wait()
            leases_left_by_kills += Delivery.objects.filter(status=DeliveryStatus.SENDING).count()
        with worker_process(WORKER_ENV):
            wait_until(
                lambda: Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count() == EVENTS,
                timeout=180,
                what="every delivery to succeed after three kills",
            )

    assert leases_left_by_kills > 0, "no kill caught a delivery mid-request"
    arrivals = assert_each_arrived_with_its_id(event_ids, receiver.requests)
    assert_database_consistent(delivery_statuses(), EVENTS)
    print(
        f"\n{EVENTS} events, 3 SIGKILLs: {arrivals.requests} requests "
        f"({arrivals.repeats} sent again), {time.monotonic() - started:.1f} s"
    )
