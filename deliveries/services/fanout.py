"""Fan-out: one Delivery row per endpoint subscribed to an event."""

from collections import defaultdict
from collections.abc import Collection
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from .. import conf, operational, ordering, payloads, subscriptions, tracing
from ..models import Delivery, DeliveryStatus, Endpoint, EndpointState, Event
from .breaker import circuit_reopens_at
from .dispatch import FAN_OUT_BATCH_SIZE, EmitBatch, emit_batch, enqueue_delivery_groups

# Of the events one transaction emits, at most this many are fanned out in it; the rest go
# to the fan-out task, which creates a large transaction's deliveries in a few statements.
INLINE_EVENTS_PER_TRANSACTION = 20


def new_delivery(*, event_id: Any, endpoint: Endpoint, now: datetime, **fields: Any) -> Delivery:
    """A delivery ready to go: pending for an active endpoint, held for a suspended one
    (resuming it delivers what it missed). Fan-out and replays both create them here."""
    status = (
        DeliveryStatus.PENDING if endpoint.state == EndpointState.ACTIVE else DeliveryStatus.HELD
    )
    due_at: datetime = now
    enqueued_at: datetime | None = now
    reopens_at = circuit_reopens_at(endpoint)
    if reopens_at is not None and reopens_at > now:
        # Its circuit is open: the delivery waits in the database, with no task message,
        # until the sweeper brings it to the probe (a refused message would cost a claim).
        due_at, enqueued_at = reopens_at, None
    return Delivery(
        event_id=event_id,
        endpoint=endpoint,
        status=status,
        next_attempt_at=due_at,
        enqueued_at=enqueued_at,
        **fields,
    )


def event_insert(event: Event) -> None:
    """Insert a new event in the current transaction and see to its fan-out.

    When its tenant has few endpoints (`WEBHOOKS_INLINE_FAN_OUT_MAX_ENDPOINTS`) its
    deliveries are created here too, in the product's transaction, and their messages go
    out on commit: no fan-out task, one broker hop less. Otherwise, and for events with an
    ordering key or beyond the first few of a transaction, the fan-out task creates them
    after the commit. Either way a committed event gets its deliveries exactly once.
    """
    batch = emit_batch()
    endpoints = _inline_endpoints(event, batch)
    now = timezone.now()
    if endpoints is not None:
        event.fanned_out_at = now
    event.save(force_insert=True)
    if endpoints is None:
        batch.event_ids.append(event.pk)
        return
    batch.fanned_out += 1
    deliveries = _deliveries_of(event, endpoints, now)
    Delivery.objects.bulk_create(deliveries)
    for delivery in _with_messages(deliveries):
        batch.delivery_groups.setdefault(delivery.endpoint_id, []).append(delivery.pk)


def _inline_endpoints(event: Event, batch: EmitBatch) -> list[Endpoint] | None:
    """The endpoints to fan the event out to in its own transaction, or None to leave it
    to the fan-out task. The transaction reads each tenant's endpoints once."""
    limit = conf.get().inline_fan_out_max_endpoints
    if not limit or event.ordering_key or batch.fanned_out >= INLINE_EVENTS_PER_TRANSACTION:
        return None
    if event.tenant not in batch.endpoints_by_tenant:
        endpoints = list(_candidate_endpoints({event.tenant})[: limit + 1])
        batch.endpoints_by_tenant[event.tenant] = endpoints if len(endpoints) <= limit else None
    return batch.endpoints_by_tenant[event.tenant]


def _with_messages(deliveries: list[Delivery]) -> list[Delivery]:
    """Held deliveries and those deferred behind an open circuit have no task message."""
    return [
        delivery
        for delivery in deliveries
        if delivery.status == DeliveryStatus.PENDING and delivery.enqueued_at is not None
    ]


def event_fan_out(*, event_id: UUID | str) -> int:
    """Fan one event out; see `events_fan_out`."""
    return events_fan_out(event_ids=[event_id])


def events_fan_out(*, event_ids: Collection[UUID | str], top_up: bool = False) -> int:
    """Create the events' deliveries and enqueue them after commit. Safe to run again.

    All the events go in one transaction, so a product transaction that emitted many
    events costs a few statements and its deliveries leave in batches per endpoint.
    With `top_up` (the message waited in a backlog) other events waiting for their
    fan-out come along. Endpoints that are suspended get a held delivery, so resuming them
    delivers what they missed; disabled endpoints get nothing. Returns how many deliveries
    were enqueued.
    """
    now = timezone.now()
    with transaction.atomic():
        # Locked: of two fan-outs of an event, one does it. An event another fan-out holds
        # is skipped, not waited for: that one does it (or, if it fails, the sweeper), and
        # this thread goes on with other work instead of queueing behind its lock.
        events = list(
            Event.objects.select_for_update(skip_locked=True)
            .filter(pk__in=list(event_ids), fanned_out_at__isnull=True)
            .order_by("created_at")
        )
        if top_up:
            # The message waited in a backlog: take other events still waiting for their
            # fan-out along (their own messages will find them done).
            room = FAN_OUT_BATCH_SIZE - len(events)
            events += list(
                Event.objects.select_for_update(skip_locked=True)
                .filter(fanned_out_at__isnull=True)
                .exclude(pk__in=[event.pk for event in events])
                .order_by("created_at")[: max(room, 0)]
            )
        if not events:
            return 0
        endpoints = _endpoints_by_tenant({event.tenant for event in events})
        deliveries = [
            delivery
            for event in events
            for delivery in _deliveries_of(event, endpoints.get(event.tenant, []), now)
        ]
        # No conflicts are possible: an event's normal deliveries are only ever created in
        # the transaction that sets its `fanned_out_at`, and its row is locked here.
        Delivery.objects.bulk_create(deliveries)
        fanned_out = [event.pk for event in events]
        Event.objects.filter(pk__in=fanned_out).update(fanned_out_at=now)
        by_endpoint: dict[UUID, list[int]] = defaultdict(list)
        for delivery in _with_messages(deliveries):
            by_endpoint[delivery.endpoint_id].append(delivery.pk)
        transaction.on_commit(
            lambda: enqueue_delivery_groups(list(by_endpoint.values())), robust=True
        )
        # Later events of these keys may have waited for this fan-out.
        for key in dict.fromkeys(event.ordering_key for event in events if event.ordering_key):
            transaction.on_commit(
                lambda key=key: ordering.enqueue_next(ordering_key=key),  # type: ignore[misc]
                robust=True,
            )
    return sum(len(ids) for ids in by_endpoint.values())


def _endpoints_by_tenant(wanted: set[str | None]) -> dict[str | None, list[Endpoint]]:
    """The endpoints that may receive events of these tenants, by tenant."""
    by_tenant: dict[str | None, list[Endpoint]] = defaultdict(list)
    for endpoint in _candidate_endpoints(wanted):
        by_tenant[endpoint.tenant].append(endpoint)
    return by_tenant


def _candidate_endpoints(wanted: set[str | None]) -> QuerySet[Endpoint]:
    """The endpoints that may receive events of these tenants.

    An event reaches its own tenant's endpoints only, and an event without a tenant only
    the endpoints without one: tenants never see each other's events.
    """
    named = [tenant for tenant in wanted if tenant is not None]
    condition = Q(tenant__in=named)
    if None in wanted:
        condition |= Q(tenant__isnull=True)
    return (
        Endpoint.objects.filter(condition)
        .exclude(state=EndpointState.DISABLED)
        .only(
            "id",
            *subscriptions.FIELDS,
            "state",
            "ordered_delivery",
            "circuit_state",
            "circuit_changed_at",
        )
        .order_by("pk")
    )


def _deliveries_of(event: Event, endpoints: list[Endpoint], now: datetime) -> list[Delivery]:
    # Only operational events need their data here; others may be offloaded and large.
    attributes = {"webhooks.event.id": str(event.pk), "webhooks.event.type": event.type}
    with tracing.span(
        "webhooks fan-out", traceparent=event.traceparent or None, attributes=attributes
    ) as span:
        deliveries = _matching(event, endpoints, now)
        tracing.set_attributes(span, {"webhooks.deliveries": len(deliveries)})
    return deliveries


def _matching(event: Event, endpoints: list[Endpoint], now: datetime) -> list[Delivery]:
    data = payloads.load(event) if event.type in operational.OPERATIONAL_EVENT_TYPES else None
    subscribers = subscriptions.Subscribers(event)
    return [
        new_delivery(
            event_id=event.pk,
            endpoint=endpoint,
            now=now,
            **ordering.delivery_fields(event, endpoint),
        )
        for endpoint in endpoints
        if subscribers.accepts(endpoint)
        and not operational.withheld(
            event_type=event.type,
            data=data,
            endpoint_id=endpoint.pk,
            endpoint_active=endpoint.state == EndpointState.ACTIVE,
        )
    ]
