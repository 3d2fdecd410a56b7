"""Scenario 4: the receiver flaps. 30 % of requests get a 500, 10 % hit the endpoint's
read timeout, and for a while the peer is down (connections refused). With a short retry
policy every event is delivered, with its id, and none is lost."""

import random
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction

from deliveries import services
from deliveries.models import Attempt, Delivery, DeliveryStatus
from tests.conftest import wait_until
from tests.faults.checks import (
    FAST_POLICY,
    assert_database_consistent,
    assert_each_arrived_with_its_id,
    delivery_statuses,
)
from tests.helpers import sweeping_in_background
from tests.receiver import ReceivedRequest, Receiver, Reply

pytestmark = [
    pytest.mark.faults,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

EVENTS = 200
READ_TIMEOUT_SECONDS = 0.3
PEER_DOWN_SECONDS = 2.0


def flapping(rng: random.Random) -> Callable[[ReceivedRequest], Reply]:
    def reply(request: ReceivedRequest) -> Reply:
        roll = rng.random()
        if roll < 0.30:
            return Reply(status=500, body=b"flap")
        if roll < 0.40:
            return Reply(delay_seconds=READ_TIMEOUT_SECONDS * 2)
        return Reply()

    return reply


def distinct_arrivals(receiver: Receiver) -> int:
    return len({r.headers["X-Webhook-Id"] for r in list(receiver.requests)})


def test_flapping_receiver_gets_every_event(
    celery_worker: object, receiver: Receiver, fast_sweeps: None, settings: Any
) -> None:
    # The breaker opens under this error rate, as it should; a short cool-down keeps the
    # scenario within a test's patience. Suspension needs an hour of failures: not here.
    settings.WEBHOOKS_BREAKER_COOLDOWN_SECONDS = 0.5
    settings.WEBHOOKS_BREAKER_RAMP_SECONDS = 1.0
    services.endpoint_create(
        url=receiver.url,
        event_types=["*"],
        **{**FAST_POLICY, "read_timeout_seconds": READ_TIMEOUT_SECONDS},
    )
    receiver.handler = flapping(random.Random(9))
    with transaction.atomic():
        event_ids = [services.emit("order.created", {"n": n}).id for n in range(EVENTS)]

    started = time.monotonic()
    with sweeping_in_background():
        wait_until(lambda: distinct_arrivals(receiver) >= EVENTS // 3, timeout=90)
        with receiver.down():
            time.sleep(PEER_DOWN_SECONDS)
        wait_until(
            lambda: Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count() == EVENTS,
            timeout=150,
            what="every delivery to succeed despite the flapping",
        )

    arrivals = assert_each_arrived_with_its_id(event_ids, receiver.requests)
    assert_database_consistent(delivery_statuses(), EVENTS)
    failures = Attempt.objects.exclude(response_status=200)
    assert failures.filter(response_status=500).exists()
    assert failures.filter(error__icontains="timeout").exists()
    assert failures.filter(error__icontains="refused").exists(), set(
        failures.filter(response_status=None).values_list("error", flat=True)[:20]
    )
    print(
        f"\n{EVENTS} events to a flapping receiver: {arrivals.requests} requests, "
        f"{Attempt.objects.count()} attempts, {time.monotonic() - started:.1f} s"
    )
