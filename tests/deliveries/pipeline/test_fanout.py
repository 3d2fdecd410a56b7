"""Fan-out by the emitting process: an event of a tenant with few endpoints gets its
deliveries right after the product's transaction commits, without a fan-out task, and
nothing of ours runs inside that transaction (a library must never fail or slow its
host's transaction)."""

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.db import connection, transaction
from django.utils import timezone

from deliveries import services
from deliveries.models import ApiToken, Delivery, DeliveryStatus, Endpoint, Event
from deliveries.pipeline import emit_batch, fanout
from deliveries.pipeline.fanout import INLINE_EVENTS_PER_TRANSACTION
from tests.conftest import wait_until
from tests.fixtures import api_client, new_endpoint
from tests.receiver import Receiver
from webhooks_core.runtime.tasking import QUEUE_DELIVERY, QUEUE_FANOUT

# Written for events fanned out by the emitting process (no worker runs here).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("inline_fan_out")]


class RolledBack(Exception):
    pass


def quick_endpoint(url: str = "http://127.0.0.1:9/hook", **fields: Any) -> Endpoint:
    return new_endpoint(url, **{"backoff_base_seconds": 0.05, **fields})


def queued(redis_client: redis.Redis, queue: str) -> int:
    return int(redis_client.llen(queue))


def test_few_endpoints_get_their_deliveries_right_after_the_commit(
    redis_client: redis.Redis,
) -> None:
    redis_client.flushdb()
    first, second = quick_endpoint(), quick_endpoint()

    with transaction.atomic():
        event = services.emit("order.created", {"n": 1})
        inside = Delivery.objects.filter(event=event).count()
        assert queued(redis_client, QUEUE_DELIVERY) == 0, "nothing may leave before commit"

    assert inside == 0, "no delivery row in the product's transaction"
    after = set(Delivery.objects.filter(event=event).values_list("endpoint_id", flat=True))
    assert after == {first.pk, second.pk}
    assert Event.objects.get(pk=event.pk).fanned_out_at is not None
    assert queued(redis_client, QUEUE_DELIVERY) == 2, "one wake per endpoint on commit"
    assert queued(redis_client, QUEUE_FANOUT) == 0, "no fan-out task"
    assert set(Delivery.objects.values_list("status", flat=True)) == {DeliveryStatus.PENDING}


def test_an_endpoint_created_later_in_the_transaction_gets_the_later_events() -> None:
    first = quick_endpoint()

    with transaction.atomic():
        early = services.emit("order.created", {"n": 1})
        second = quick_endpoint()
        late = services.emit("order.created", {"n": 2})

    endpoints_of = {
        event.pk: set(Delivery.objects.filter(event=event).values_list("endpoint_id", flat=True))
        for event in (early, late)
    }
    # Every endpoint existing at commit gets the events committed with it.
    assert endpoints_of[early.pk] == endpoints_of[late.pk] == {first.pk, second.pk}


def _in_another_connection(call: Callable[[], Any]) -> Any:
    """Run `call` in a thread of its own (so on a database connection of its own), and
    give up waiting after 10 s: the API must not wait on the product's transaction."""
    answers: list[Any] = []

    def run() -> None:
        try:
            answers.append(call())
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=10)
    assert answers, "the API waited on the open product transaction"
    return answers[0]


def test_an_endpoint_deleted_while_a_product_transaction_is_open_never_fails_its_commit() -> None:
    doomed, kept = quick_endpoint(), quick_endpoint()
    _, plain = ApiToken.issue("tests")
    client = api_client(plain)

    with transaction.atomic():
        event = services.emit("order.created", {"n": 1})
        # Another connection (the API) deletes an endpoint and creates one meanwhile: it
        # answers at once, and the product's COMMIT below must still succeed.
        deleted = _in_another_connection(
            lambda: client.delete(f"/api/v1/endpoints/{doomed.pk}").status_code
        )
        created = _in_another_connection(
            lambda: (
                client.post(
                    "/api/v1/endpoints",
                    {"url": "http://127.0.0.1:9/new", "event_types": ["*"]},
                    format="json",
                ).status_code
            )
        )
        assert (deleted, created) == (204, 201)

    endpoints = set(Delivery.objects.filter(event=event).values_list("endpoint_id", flat=True))
    assert doomed.pk not in endpoints
    assert kept.pk in endpoints
    assert len(endpoints) == 2, "the endpoint created before the commit gets the event"


def test_a_rolled_back_transaction_leaves_no_event_no_delivery_no_message(
    redis_client: redis.Redis,
) -> None:
    redis_client.flushdb()
    quick_endpoint()

    def emit_then_fail() -> None:
        with transaction.atomic():
            services.emit("order.created", {"n": 1})
            raise RolledBack

    with pytest.raises(RolledBack):
        emit_then_fail()

    assert not Event.objects.exists()
    assert not Delivery.objects.exists()
    assert queued(redis_client, QUEUE_DELIVERY) == queued(redis_client, QUEUE_FANOUT) == 0


def test_an_event_of_a_rolled_back_savepoint_gets_nothing_and_the_others_go_on(
    redis_client: redis.Redis,
) -> None:
    redis_client.flushdb()
    quick_endpoint()

    def emit_in_a_savepoint_then_fail() -> None:
        with transaction.atomic():
            services.emit("order.created", {"n": 2})
            raise RolledBack

    with transaction.atomic():
        kept = services.emit("order.created", {"n": 1})
        with pytest.raises(RolledBack):
            emit_in_a_savepoint_then_fail()

    assert list(Event.objects.values_list("pk", flat=True)) == [kept.pk]
    assert list(Delivery.objects.values_list("event_id", flat=True)) == [kept.pk]
    assert queued(redis_client, QUEUE_FANOUT) == 0, "nothing left over for the fan-out task"


def test_an_event_already_fanned_out_elsewhere_gets_no_second_delivery(
    redis_client: redis.Redis,
) -> None:
    redis_client.flushdb()
    quick_endpoint()
    fanned_out_by_the_task: list[int] = []

    def fan_out_first(events: list[Event]) -> list[Any]:
        # Another process (the fan-out task, the sweeper) got there between the commit
        # and this process's fan-out.
        fanned_out_by_the_task.append(services.events_fan_out(event_ids=[e.pk for e in events]))
        return fanout.events_fan_out_if_few_endpoints(events)

    with transaction.atomic():
        event = services.emit("order.created", {"n": 1})
        emit_batch.emit_batch().fan_out_inline = fan_out_first

    assert fanned_out_by_the_task == [1]
    assert Delivery.objects.filter(event=event).count() == 1
    assert queued(redis_client, QUEUE_FANOUT) == 0, "no failure handed to the fan-out task"


def test_an_event_another_fan_out_holds_is_skipped_not_waited_for(
    redis_client: redis.Redis,
) -> None:
    redis_client.flushdb()
    quick_endpoint()
    locked, done = threading.Event(), threading.Event()
    left_over: list[Any] = []

    def hold(event_id: Any) -> None:
        # Another fan-out (the task, the sweeper) holds the event's row.
        try:
            with transaction.atomic():
                list(Event.objects.select_for_update().filter(pk=event_id))
                locked.set()
                done.wait(timeout=5)
        finally:
            connection.close()

    def fan_out_while_held(events: list[Event]) -> list[Any]:
        holder = threading.Thread(target=hold, args=(events[0].pk,))
        holder.start()
        assert locked.wait(timeout=10)
        try:
            left_over.extend(fanout.events_fan_out_if_few_endpoints(events))
        finally:
            done.set()
            holder.join(timeout=10)
        return left_over

    with transaction.atomic():
        event = services.emit("order.created", {"n": 1})
        emit_batch.emit_batch().fan_out_inline = fan_out_while_held

    assert not Delivery.objects.filter(event=event).exists(), "its holder does it"
    assert Event.objects.get(pk=event.pk).fanned_out_at is None
    assert left_over == []
    assert queued(redis_client, QUEUE_FANOUT) == 0


def test_filters_decide_on_the_data_as_stored_not_as_the_product_changed_it_later() -> None:
    paid_only = quick_endpoint(filter={"data.status": {"$in": ["paid"]}})
    data = {"status": "paid"}

    with transaction.atomic():
        first = services.emit("order.created", data)
        # The product reuses its dict for the next event before the commit.
        data["status"] = "refunded"
        second = services.emit("order.created", data)

    assert Event.objects.get(pk=first.pk).data == {"status": "paid"}
    assert Event.objects.get(pk=second.pk).data == {"status": "refunded"}
    delivered = set(Delivery.objects.values_list("event_id", flat=True))
    assert delivered == {first.pk}, "the filter decides on each event's stored data"
    assert Delivery.objects.get().endpoint_id == paid_only.pk


def test_more_endpoints_than_the_limit_go_through_the_fan_out_task(
    celery_worker: object, receiver: Receiver, settings: Any
) -> None:
    settings.WEBHOOKS_INLINE_FAN_OUT_MAX_ENDPOINTS = 2
    endpoints = {quick_endpoint(receiver.url).pk for _ in range(3)}

    with transaction.atomic():
        event = services.emit("order.created", {"n": 1})
        assert not Delivery.objects.filter(event=event).exists()

    receiver.wait_for(3)
    wait_until(
        lambda: Delivery.objects.filter(event=event, status=DeliveryStatus.SUCCEEDED).count() == 3,
        what="three deliveries to succeed",
    )
    assert set(Delivery.objects.values_list("endpoint_id", flat=True)) == endpoints


def test_another_tenant_with_many_endpoints_does_not_change_the_choice(settings: Any) -> None:
    settings.WEBHOOKS_INLINE_FAN_OUT_MAX_ENDPOINTS = 2
    for _ in range(3):
        quick_endpoint(tenant="big")
    small = quick_endpoint(tenant="small")

    with transaction.atomic():
        for_big = services.emit("order.created", {"n": 1}, tenant="big")
        for_small = services.emit("order.created", {"n": 2}, tenant="small")

    assert not Delivery.objects.filter(event=for_big).exists(), "left to the fan-out task"
    small_ones = Delivery.objects.filter(event=for_small)
    assert list(small_ones.values_list("endpoint", flat=True)) == [small.pk]


def test_events_with_an_ordering_key_go_through_the_fan_out_task() -> None:
    quick_endpoint(ordered_delivery=True)

    with transaction.atomic():
        event = services.emit("order.created", {"n": 1}, ordering_key="order-1")

    assert not Delivery.objects.filter(event=event).exists()
    assert Event.objects.get(pk=event.pk).fanned_out_at is None


def test_only_the_first_events_of_a_transaction_are_fanned_out_by_its_process() -> None:
    quick_endpoint()
    count = INLINE_EVENTS_PER_TRANSACTION + 5

    with transaction.atomic():
        events = [services.emit("order.created", {"n": n}) for n in range(count)]

    with_deliveries = set(Delivery.objects.values_list("event_id", flat=True))
    assert with_deliveries == {event.pk for event in events[:INLINE_EVENTS_PER_TRANSACTION]}
    assert services.events_fan_out(event_ids=[event.pk for event in events]) == 5
    assert Delivery.objects.count() == count


def test_a_suspended_endpoint_gets_a_held_delivery_and_no_message(
    redis_client: redis.Redis,
) -> None:
    redis_client.flushdb()
    endpoint = quick_endpoint()
    services.endpoint_suspend(endpoint_id=endpoint.pk, reason="maintenance")

    event = services.emit("order.created", {"n": 1})

    assert Delivery.objects.get(event=event).status == DeliveryStatus.HELD
    assert queued(redis_client, QUEUE_DELIVERY) == 0


def test_a_lost_message_is_sent_again_by_the_sweeper(
    redis_client: redis.Redis, settings: Any
) -> None:
    settings.WEBHOOKS_WAKE_GRACE_SECONDS = 1.0
    redis_client.flushdb()
    quick_endpoint()
    event = services.emit("order.created", {"n": 1})
    redis_client.flushdb()  # the broker lost the delivery's message

    long_ago = timezone.now() - timedelta(seconds=5)
    Delivery.objects.filter(event=event).update(next_attempt_at=long_ago)
    assert services.sweep().deliveries_due == 1
    assert queued(redis_client, QUEUE_DELIVERY) == 1
