"""Fan-out: one Delivery row per endpoint subscribed to an event."""

from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from .. import event_types, operational, ordering, payloads
from ..models import Delivery, DeliveryStatus, Endpoint, EndpointState, Event
from .enqueue import enqueue_deliveries


def new_delivery(*, event_id: Any, endpoint: Endpoint, now: datetime, **fields: Any) -> Delivery:
    """A delivery ready to go: pending for an active endpoint, held for a suspended one
    (resuming it delivers what it missed). Fan-out and replays both create them here."""
    status = (
        DeliveryStatus.PENDING if endpoint.state == EndpointState.ACTIVE else DeliveryStatus.HELD
    )
    return Delivery(
        event_id=event_id,
        endpoint=endpoint,
        status=status,
        next_attempt_at=now,
        enqueued_at=now,
        **fields,
    )


def event_fan_out(*, event_id: UUID | str) -> int:
    """Create the event's deliveries and enqueue them after commit. Safe to run again.

    Endpoints that are suspended get a held delivery, so resuming them delivers what they
    missed; disabled endpoints get nothing. Returns how many deliveries were enqueued.
    """
    now = timezone.now()
    with transaction.atomic():
        event = Event.objects.select_for_update().filter(pk=event_id).first()
        if event is None or event.fanned_out_at is not None:
            return 0
        endpoints = Endpoint.objects.exclude(state=EndpointState.DISABLED).only(
            "id", "event_types", "state", "ordered_delivery"
        )
        # Only operational events need their data here; others may be offloaded and large.
        data = payloads.load(event) if event.type in operational.OPERATIONAL_EVENT_TYPES else None
        deliveries = [
            new_delivery(
                event_id=event.pk,
                endpoint=endpoint,
                now=now,
                **ordering.delivery_fields(event, endpoint),
            )
            for endpoint in endpoints
            if event_types.matches(event.type, endpoint.event_types)
            and not operational.withheld(
                event_type=event.type,
                data=data,
                endpoint_id=endpoint.pk,
                endpoint_active=endpoint.state == EndpointState.ACTIVE,
            )
        ]
        # ignore_conflicts: a fan-out that crashed after inserting may run again.
        Delivery.objects.bulk_create(deliveries, ignore_conflicts=True)
        event.fanned_out_at = now
        event.save(update_fields=["fanned_out_at"])
        delivery_ids = list(
            Delivery.objects.filter(
                event=event, is_replay=False, status=DeliveryStatus.PENDING, attempts=0
            ).values_list("id", flat=True)
        )
        transaction.on_commit(lambda: enqueue_deliveries(delivery_ids), robust=True)
        if event.ordering_key:
            # Later events of this key may have waited for this fan-out.
            key = event.ordering_key
            transaction.on_commit(lambda: ordering.enqueue_next(ordering_key=key), robust=True)
    return len(delivery_ids)
