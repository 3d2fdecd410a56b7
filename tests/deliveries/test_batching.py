"""Batches: several deliveries to one endpoint claimed, sent and recorded together.

The batch is run in this process (`deliveries_attempt`) against the real database, Redis
and an HTTP receiver on 127.0.0.1, so each test can look at one batch's effects.
"""

import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from deliveries import conf, services
from deliveries.models import (
    Attempt,
    CircuitState,
    Delivery,
    DeliveryStatus,
    Endpoint,
)
from deliveries.services.recording import Outcome
from tests.deliveries.test_pipeline import make_endpoint
from tests.receiver import Receiver, Reply

pytestmark = pytest.mark.django_db(transaction=True)

# Below the 1.5 s reply that must time out; connect (1 s) + read (1 s) exceed half of a 2 s lease.
READ_TIMEOUT = {"read_timeout_seconds": 1.0}


def deliveries_of(count: int, endpoint: Endpoint) -> list[int]:
    """Emit `count` events and fan them out here, without a worker."""
    with transaction.atomic():
        events = [services.emit("order.created", {"n": n}) for n in range(count)]
    services.events_fan_out(event_ids=[event.pk for event in events])
    return list(
        Delivery.objects.filter(endpoint=endpoint).order_by("pk").values_list("pk", flat=True)
    )


def test_a_batch_costs_a_few_statements_not_a_few_per_delivery(receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver, **READ_TIMEOUT)
    ids = deliveries_of(20, endpoint)

    from django.db import connection

    with CaptureQueriesContext(connection) as queries:
        outcomes = services.deliveries_attempt(delivery_ids=ids)

    assert set(outcomes.values()) == {Outcome.SUCCEEDED}
    assert len(receiver.requests) == 20
    assert len(queries) <= 15  # claim, read, secrets, write-back, endpoint health
    assert set(Delivery.objects.values_list("status", "attempts")) == {
        (DeliveryStatus.SUCCEEDED, 1)
    }
    assert Attempt.objects.count() == 20
    assert Delivery.objects.filter(first_attempt_at__isnull=True).count() == 0


def test_mixed_answers_are_recorded_one_by_one(receiver: Receiver) -> None:
    # One request at a time, so that the scripted answers meet the deliveries in order.
    endpoint, _ = make_endpoint(receiver, max_in_flight=1, **READ_TIMEOUT)
    ids = deliveries_of(4, endpoint)
    receiver.script(200, 500, 200, 500)

    outcomes = services.deliveries_attempt(delivery_ids=ids)

    assert [outcomes[i] for i in ids] == [
        Outcome.SUCCEEDED,
        Outcome.RETRY_SCHEDULED,
        Outcome.SUCCEEDED,
        Outcome.RETRY_SCHEDULED,
    ]
    statuses = dict(Delivery.objects.values_list("pk", "last_status_code"))
    assert [statuses[i] for i in ids] == [200, 500, 200, 500]
    endpoint.refresh_from_db()
    # Only the failures after the last success count as consecutive.
    assert endpoint.consecutive_failures == 1
    assert endpoint.last_success_at is not None


def test_no_answer_stops_the_batch_and_the_rest_spend_no_attempt(receiver: Receiver) -> None:
    # One request at a time: with more, those already out when the first times out end too.
    endpoint, _ = make_endpoint(receiver, max_in_flight=1, **READ_TIMEOUT)
    ids = deliveries_of(5, endpoint)
    receiver.script(Reply(delay_seconds=1.5))  # beyond the read timeout

    outcomes = services.deliveries_attempt(delivery_ids=ids)

    assert outcomes[ids[0]] == Outcome.RETRY_SCHEDULED
    assert {outcomes[i] for i in ids[1:]} == {Outcome.DEFERRED}
    rest = Delivery.objects.filter(pk__in=ids[1:])
    assert set(rest.values_list("status", "attempts")) == {(DeliveryStatus.PENDING, 0)}
    assert Attempt.objects.count() == 1


def test_a_batch_sends_up_to_the_in_flight_limit_at_once(receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver, max_in_flight=3)
    ids = deliveries_of(9, endpoint)
    receiver.default = Reply(delay_seconds=0.3)

    started = time.monotonic()
    outcomes = services.deliveries_attempt(delivery_ids=ids)
    elapsed = time.monotonic() - started

    assert set(outcomes.values()) == {Outcome.SUCCEEDED}
    # Three at a time: about 0.9 s, where one after another would take 2.7 s.
    assert elapsed < 2.0
    arrivals = sorted(r.received_at for r in receiver.requests)
    assert all(
        later - earlier > 0.2 for earlier, later in zip(arrivals, arrivals[3:], strict=False)
    )


def test_a_batch_refused_a_slot_stays_due_for_the_batch_holding_it(
    receiver: Receiver, redis_client: Any
) -> None:
    from deliveries.health.store import get_store

    redis_client.flushdb()
    endpoint, _ = make_endpoint(receiver, max_in_flight=1)
    first, second = deliveries_of(2, endpoint)
    store = get_store(conf.health().redis_url)
    assert store.acquire_slots(str(endpoint.pk), "holder", 1, 60, 1) == 1
    store.release_slots(str(endpoint.pk), "holder", 0, 0.4)  # it holds; its last took 0.4 s

    assert services.deliveries_attempt(delivery_ids=[second]) == {second: Outcome.DEFERRED}

    deferred = Delivery.objects.get(pk=second)
    assert (deferred.status, deferred.attempts) == (DeliveryStatus.PENDING, 0)
    assert deferred.next_attempt_at is not None
    assert deferred.next_attempt_at <= timezone.now()  # due: the holder may take it along
    store.release_slots(str(endpoint.pk), "holder", 1, 0.4)
    # The next batch of the endpoint takes the deferred one along once its own succeeded.
    outcomes = services.deliveries_attempt(delivery_ids=[first])
    assert outcomes == {first: Outcome.SUCCEEDED, second: Outcome.SUCCEEDED}
    assert len(receiver.requests) == 2


def test_a_batch_starts_no_request_its_lease_might_not_cover(
    receiver: Receiver, settings: Any
) -> None:
    settings.WEBHOOKS_LEASE_SECONDS = 2.0  # half of it is spent by one request's timeouts
    endpoint, _ = make_endpoint(receiver, **READ_TIMEOUT)
    ids = deliveries_of(3, endpoint)

    outcomes = services.deliveries_attempt(delivery_ids=ids)

    assert outcomes[ids[0]] == Outcome.SUCCEEDED
    assert {outcomes[i] for i in ids[1:]} == {Outcome.DEFERRED}
    assert len(receiver.requests) == 1


def test_an_open_circuit_parks_new_deliveries_without_a_message(receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver, **READ_TIMEOUT)
    opened_at = timezone.now()
    Endpoint.objects.filter(pk=endpoint.pk).update(
        circuit_state=CircuitState.OPEN, circuit_changed_at=opened_at
    )

    [delivery_id] = deliveries_of(1, endpoint)

    parked = Delivery.objects.get(pk=delivery_id)
    assert parked.status == DeliveryStatus.PENDING
    assert parked.enqueued_at is None  # the sweeper brings it when the cool-down ends
    assert parked.next_attempt_at is not None
    assert parked.next_attempt_at >= opened_at + timedelta(seconds=1)
    assert services.deliveries_attempt(delivery_ids=[delivery_id]) == {}  # not due yet


def test_a_saturated_endpoint_s_message_goes_back_without_a_claim(
    receiver: Receiver, redis_client: Any
) -> None:
    from deliveries.health.store import get_store
    from deliveries.tasks import deliver_batch

    redis_client.flushdb()
    endpoint, _ = make_endpoint(receiver, max_in_flight=1, **READ_TIMEOUT)
    [delivery_id] = deliveries_of(1, endpoint)
    store = get_store(conf.health().redis_url)
    assert store.acquire_slot(str(endpoint.pk), "another-batch", 1, 60)  # a hung request

    assert deliver_batch(delivery_ids=[delivery_id]) == {}

    untouched = Delivery.objects.get(pk=delivery_id)
    assert (untouched.status, untouched.attempts) == (DeliveryStatus.PENDING, 0)
    assert receiver.requests == []
    store.release_slot(str(endpoint.pk), "another-batch")
    assert services.deliveries_busy_wait(delivery_ids=[delivery_id]) == 0.0
    assert services.deliveries_attempt(delivery_ids=[delivery_id]) == {
        delivery_id: Outcome.SUCCEEDED
    }


def _queued_batches(redis_client: Any) -> list[list[int]]:
    """The delivery ids of each `deliver_batch` message waiting in Redis."""
    import base64
    import json

    from webhooks_core.tasking import QUEUE_DELIVERY

    batches = []
    for raw in redis_client.lrange(QUEUE_DELIVERY, 0, -1):
        args, _, _ = json.loads(base64.b64decode(json.loads(raw)["body"]))
        batches.append(args[0])
    return batches


def test_a_message_refused_a_slot_is_taken_along_by_the_batch_holding_it(
    receiver: Receiver, redis_client: Any
) -> None:
    from deliveries.health.store import get_store
    from deliveries.tasks import deliver_batch

    endpoint, _ = make_endpoint(receiver, max_in_flight=1, **READ_TIMEOUT)
    waiting, holder = deliveries_of(2, endpoint)
    store = get_store(conf.health().redis_url)
    assert store.acquire_slots(str(endpoint.pk), "holder", 1, 60, 1) == 1
    assert deliver_batch(delivery_ids=[waiting]) == {}  # no slot: left due, no countdown
    store.release_slots(str(endpoint.pk), "holder", 1, 0.0)

    outcomes = services.deliveries_attempt(delivery_ids=[holder])

    assert outcomes == {holder: Outcome.SUCCEEDED, waiting: Outcome.SUCCEEDED}
    assert len(receiver.requests) == 2


def test_a_batch_that_frees_its_slot_hands_the_due_deliveries_on(
    receiver: Receiver, redis_client: Any, settings: Any
) -> None:
    """A batch that stops taking deliveries along (its request failed) leaves a message
    for the due ones refused a slot meanwhile, so none waits for the sweeper."""
    from deliveries.health.store import get_store
    from deliveries.tasks import deliver_batch

    settings.WEBHOOKS_MAX_COUNTDOWN_SECONDS = 0.01  # the failed one's retry: no message
    endpoint, _ = make_endpoint(receiver, max_in_flight=1, **READ_TIMEOUT)
    waiting, holder = deliveries_of(2, endpoint)
    store = get_store(conf.health().redis_url)
    assert store.acquire_slots(str(endpoint.pk), "holder", 1, 60, 1) == 1
    assert deliver_batch(delivery_ids=[waiting]) == {}
    store.release_slots(str(endpoint.pk), "holder", 1, 0.0)
    redis_client.delete("webhooks.delivery")  # the messages of both were consumed
    receiver.script(500)

    outcomes = services.deliveries_attempt(delivery_ids=[holder])

    assert outcomes == {holder: Outcome.RETRY_SCHEDULED}
    assert _queued_batches(redis_client) == [[waiting]]
    assert Delivery.objects.get(pk=waiting).status == DeliveryStatus.PENDING


def test_an_ordered_delivery_refused_a_slot_gets_its_message_back(
    receiver: Receiver, redis_client: Any
) -> None:
    """Batches take only unordered deliveries along: an ordered one, the head of its
    key's line, must not be left for the sweeper."""
    from deliveries.health.store import get_store
    from deliveries.tasks import deliver_batch

    endpoint, _ = make_endpoint(receiver, max_in_flight=1, ordered_delivery=True, **READ_TIMEOUT)
    event = services.emit("order.created", {"n": 1}, ordering_key="order-1")
    services.events_fan_out(event_ids=[event.pk])
    head = Delivery.objects.get(event=event).pk
    store = get_store(conf.health().redis_url)
    assert store.acquire_slots(str(endpoint.pk), "holder", 1, 60, 1) == 1
    redis_client.delete("webhooks.delivery")

    assert deliver_batch(delivery_ids=[head]) == {}

    assert _queued_batches(redis_client) == [[head]]
    store.release_slots(str(endpoint.pk), "holder", 1, 0.0)
