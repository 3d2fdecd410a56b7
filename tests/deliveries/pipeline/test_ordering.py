"""A key's line on an ordered endpoint (`deliveries.pipeline.ordering`): one head at a time, in the
order the database saw the events, scoped to the key's tenant."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus, Endpoint, Event
from deliveries.pipeline.ordering import claimable_in_order, next_in_line
from tests.receiver import Receiver

pytestmark = pytest.mark.django_db


def ordered_endpoint(receiver: Receiver, **fields: Any) -> Endpoint:
    endpoint, _ = services.endpoint_create(
        url=receiver.url, event_types=["*"], ordered_delivery=True, **fields
    )
    return endpoint


def heads(endpoint: Endpoint) -> list[Delivery]:
    """The endpoint's pending rows a claim may take now."""
    return list(
        Delivery.objects.filter(endpoint=endpoint, status=DeliveryStatus.PENDING).filter(
            claimable_in_order()
        )
    )


def emit_and_fan_out(key: str, **fields: Any) -> Event:
    event = services.emit("order.created", {"id": 1}, ordering_key=key, **fields)
    services.events_fan_out(event_ids=[event.pk])
    return event


def test_a_key_keeps_the_order_the_database_saw_whatever_the_emitting_host_s_clock(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = ordered_endpoint(receiver)
    real_now = timezone.now
    # The first event is emitted on a web host whose clock is an hour ahead.
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(hours=1))
    first = emit_and_fan_out("order-1")
    monkeypatch.setattr(timezone, "now", real_now)
    second = emit_and_fan_out("order-1")

    first.refresh_from_db()
    second.refresh_from_db()
    assert first.created_at < second.created_at
    [head] = heads(endpoint)
    assert head.event_id == first.pk
    assert next_in_line(ordering_key="order-1") == [head.pk]


def test_equal_positions_make_one_head_the_lower_id(receiver: Receiver) -> None:
    endpoint = ordered_endpoint(receiver)
    emit_and_fan_out("order-1")
    emit_and_fan_out("order-1")
    rows = Delivery.objects.filter(endpoint=endpoint)
    rows.update(ordering_position=timezone.now())

    [head] = heads(endpoint)
    assert head.pk == min(rows.values_list("pk", flat=True))
    assert next_in_line(ordering_key="order-1") == [head.pk]


def test_another_tenant_s_event_with_the_same_key_holds_no_line(receiver: Receiver) -> None:
    endpoint = ordered_endpoint(receiver, tenant="acme")
    # Another tenant's event of the same key string, earlier and not fanned out yet.
    services.emit("order.created", {"id": 1}, ordering_key="order-1", tenant="globex")
    ours = emit_and_fan_out("order-1", tenant="acme")

    [head] = heads(endpoint)
    assert head.event_id == ours.pk

    # An earlier event of our own tenant still waiting for its fan-out does hold it.
    Event.objects.filter(pk=ours.pk).update(created_at=timezone.now() + timedelta(hours=1))
    Delivery.objects.filter(endpoint=endpoint).update(
        ordering_position=timezone.now() + timedelta(hours=1)
    )
    services.emit("order.created", {"id": 2}, ordering_key="order-1", tenant="acme")
    assert heads(endpoint) == []


def test_keys_without_a_tenant_are_a_scope_of_their_own(receiver: Receiver) -> None:
    endpoint = ordered_endpoint(receiver)
    services.emit("order.created", {"id": 1}, ordering_key="order-1", tenant="globex")
    ours = emit_and_fan_out("order-1")

    [head] = heads(endpoint)
    assert head.event_id == ours.pk
