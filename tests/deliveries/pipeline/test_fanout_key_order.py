"""A key's events are fanned out in their order (`fanout._fan_out`, `ordering.held_back`):
a keyed event is not fanned out while an earlier event of its key and tenant still waits
for its fan-out, so the feed's order (the fan-out transaction's id) is the key's order, as
push keeps it."""

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus, Endpoint, Event
from deliveries.pipeline import fanout, subscriptions
from deliveries.pipeline.ordering import claimable_in_order
from deliveries.polling import services as polling
from tests.conftest import wait_until
from tests.receiver import Receiver


def _event(label: str, key: str = "order-1", **fields: Any) -> Event:
    """An event committed by the product, its fan-out not done yet."""
    return Event.objects.create(
        type="order.created",
        occurred_at=timezone.now(),
        data={"order": label},
        ordering_key=key,
        **fields,
    )


def _poll_endpoint(**fields: Any) -> Endpoint:
    endpoint, _ = services.endpoint_create(url="", event_types=["*"], mode="poll", **fields)
    return endpoint


def _ordered_endpoint(receiver: Receiver, **fields: Any) -> Endpoint:
    endpoint, _ = services.endpoint_create(
        url=receiver.url, event_types=["*"], ordered_delivery=True, **fields
    )
    return endpoint


def _fanned_out(event: Event) -> bool:
    event.refresh_from_db()
    return event.fanned_out_at is not None


@pytest.mark.django_db(transaction=True)
def test_a_later_event_s_fan_out_that_began_first_keeps_the_key_s_order_push_and_pull(
    receiver: Receiver, celery_worker: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """E1 then E2 (one key) are committed; E2's fan-out begins first (its transaction has
    its id) and commits after E1's. The feed orders rows by that id: without the rule it
    hands out E2 first. Push sends E1 first either way (its claim waits for an earlier
    event not fanned out yet)."""
    if connection.vendor != "postgresql":
        pytest.skip("the feed's position is the fan-out transaction's id on PostgreSQL")
    pushed = _ordered_endpoint(receiver)
    polled = _poll_endpoint()
    first, second = _event("first"), _event("second")

    in_transaction, may_commit, second_done = (threading.Event() for _ in range(3))
    real = fanout._endpoints_by_tenant

    def paused(*args: Any, **kwargs: Any) -> Any:
        # Called after the fan-out's first write: its transaction has its id.
        if threading.current_thread().name == "second":
            in_transaction.set()
            assert may_commit.wait(20)
        return real(*args, **kwargs)

    monkeypatch.setattr(fanout, "_endpoints_by_tenant", paused)

    def fan_out(event: Event) -> None:
        try:
            services.events_fan_out(event_ids=[event.pk])
        finally:
            connection.close()

    def second_fan_out() -> None:
        try:
            fan_out(second)
        finally:
            second_done.set()

    later = threading.Thread(target=second_fan_out, name="second")
    later.start()
    try:
        wait_until(lambda: in_transaction.is_set() or second_done.is_set(), what="E2's fan-out")
        earlier = threading.Thread(target=fan_out, args=(first,), name="first")
        earlier.start()
        earlier.join(20)
        assert _fanned_out(first)
    finally:
        may_commit.set()
        later.join(20)
    # E2 is fanned out (by its own fan-out, or after E1's by the message E1's sends).
    wait_until(lambda: Delivery.objects.filter(event=second, endpoint=polled).exists(), what="E2")

    read: list[str] = []
    iterator = None

    def both_read() -> bool:
        nonlocal iterator
        page = polling.feed_read(endpoint=polled, iterator=iterator)
        read.extend(message["id"] for message in page.data)
        iterator = page.iterator
        return len(read) >= 2

    wait_until(both_read, what="both messages in the feed")
    assert read == [str(first.pk), str(second.pk)]
    sent = [request.headers["webhook-id"] for request in receiver.wait_for(2)]
    assert sent == [str(first.pk), str(second.pk)]
    succeeded = Delivery.objects.filter(endpoint=pushed, status=DeliveryStatus.SUCCEEDED)
    wait_until(lambda: succeeded.count() == 2, what="both pushes recorded")


@pytest.mark.django_db
def test_a_keyed_event_waits_for_an_earlier_one_s_fan_out() -> None:
    endpoint = _poll_endpoint()
    first, second = _event("first"), _event("second")
    other_key = _event("other", key="order-2")

    # E2's own message comes first: it is left waiting, unmarked, and nothing is written.
    assert services.events_fan_out(event_ids=[second.pk, other_key.pk]) == 1
    assert not _fanned_out(second)
    assert not Delivery.objects.filter(event=second).exists()

    services.events_fan_out(event_ids=[first.pk])
    services.events_fan_out(event_ids=[second.pk])
    rows = list(Delivery.objects.filter(endpoint=endpoint, event__ordering_key="order-1"))
    assert [row.event_id for row in sorted(rows, key=lambda row: row.pk)] == [first.pk, second.pk]


@pytest.mark.django_db
def test_events_of_one_key_in_one_fan_out_get_rows_in_their_order() -> None:
    endpoint = _poll_endpoint()
    events = [_event(label) for label in ("a", "b", "c")]

    services.events_fan_out(event_ids=[events[2].pk, events[0].pk, events[1].pk])
    rows = Delivery.objects.filter(endpoint=endpoint).order_by("pk")
    assert list(rows.values_list("event_id", flat=True)) == [event.pk for event in events]


@pytest.mark.django_db
def test_a_fan_out_fans_out_the_events_it_held_back_after_its_commit(
    django_capture_on_commit_callbacks: Any,
) -> None:
    endpoint = _poll_endpoint()
    first, second, third = _event("first"), _event("second"), _event("third")
    services.events_fan_out(event_ids=[second.pk])
    services.events_fan_out(event_ids=[third.pk])
    assert not Delivery.objects.exists()

    # No message, no sweeper: E1's fan-out does theirs once it has committed.
    with django_capture_on_commit_callbacks(execute=True):
        services.events_fan_out(event_ids=[first.pk])
    rows = Delivery.objects.filter(endpoint=endpoint).order_by("pk")
    assert list(rows.values_list("event_id", flat=True)) == [first.pk, second.pk, third.pk]


@pytest.mark.django_db
def test_another_tenant_s_key_and_a_gone_event_hold_nothing() -> None:
    endpoint = _poll_endpoint(tenant="acme")
    _event("globex's", tenant="globex")
    erased = _event("erased", tenant="acme")
    ours = _event("ours", tenant="acme")
    assert services.events_fan_out(event_ids=[ours.pk]) == 0

    Event.objects.filter(pk=erased.pk).delete()
    assert services.events_fan_out(event_ids=[ours.pk]) == 1
    assert Delivery.objects.get(endpoint=endpoint).event_id == ours.pk


@pytest.mark.django_db
def test_an_earlier_event_whose_fan_out_keeps_failing_holds_its_key_for_a_bounded_time(
    receiver: Receiver, settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.WEBHOOKS_ORDERING_FAN_OUT_WAIT_SECONDS = 60.0
    polled = _poll_endpoint()
    pushed = _ordered_endpoint(receiver)
    dead, second = _event("dead"), _event("second")
    real = subscriptions.Subscribers

    def failing(event: Event) -> Any:
        if event.pk == dead.pk:
            raise RuntimeError("this event's fan-out fails every time")
        return real(event)

    monkeypatch.setattr(subscriptions, "Subscribers", failing)

    # The sweeper's message carries both: the failing one fails alone, the other waits
    # for it while it is younger than the bound.
    with pytest.raises(RuntimeError):
        services.events_fan_out(event_ids=[dead.pk, second.pk])
    assert not _fanned_out(second)

    # Past the bound it no longer holds its key: the next try fans the later one out, and
    # a push claim takes it.
    Event.objects.filter(pk=dead.pk).update(created_at=timezone.now() - timedelta(seconds=61))
    with pytest.raises(RuntimeError):
        services.events_fan_out(event_ids=[dead.pk, second.pk])
    assert _fanned_out(second)
    assert Delivery.objects.filter(endpoint=polled, event=second).exists()
    pending = Delivery.objects.filter(endpoint=pushed, status=DeliveryStatus.PENDING)
    assert list(pending.filter(claimable_in_order()).values_list("event_id", flat=True)) == [
        second.pk
    ]
