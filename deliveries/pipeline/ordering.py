"""Per-key ordered delivery: events with the same ordering key reach an endpoint that asks
for it one at a time, in emit order; different keys go in parallel.

How: fan-out copies the event's key and creation time onto the delivery of an ordered
endpoint (``delivery_fields``). The creation time is the database's clock at the event's
insert (web hosts' clocks may disagree); deliveries with the same one are ordered by id.
The claim adds one condition (``claimable_in_order``): no *earlier* delivery of that key to
that endpoint still blocks it (pending, sending, held or dead-lettered), and no earlier
event of that key and tenant is still waiting for its fan-out. When a
delivery succeeds, or an operator cancels a dead letter, the next one of its key is
endpoint's owner claims the next head (woken by ``endpoints_with_next_due`` when another
process changed the line); the sweeper is only the safety net.

The trade-off: an earlier event that keeps failing holds its key back for its whole retry
cycle (up to ``max_attempts`` / ``retry_window_seconds``); while the endpoint is suspended
its held deliveries hold their keys; and a **dead-lettered** delivery blocks its key until
an operator acts: *retry* (it is delivered, then the rest follow in order) or *cancel* (the
rest follow without it). Later events of that key wait, so the endpoint never sees a later
state without the earlier one; the price is that one poison event holds its object's
events back until someone looks at the dead-letter queue (other keys are not affected).
Changing ``ordered_delivery`` affects events fanned out afterwards.
"""

from collections.abc import Iterable
from typing import Any

from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, Subquery
from django.db.models.functions import Now
from django.db.models.lookups import IsNull

from deliveries.models import Delivery, DeliveryStatus, Endpoint, Event

# Deliveries that keep the later events of their key waiting.
BLOCKING = (
    DeliveryStatus.PENDING,
    DeliveryStatus.SENDING,
    DeliveryStatus.HELD,
    DeliveryStatus.DEAD_LETTERED,
)


def delivery_fields(event: Event, endpoint: Endpoint) -> dict[str, Any]:
    """The ordering fields of a new delivery (empty unless both sides take part)."""
    if not (endpoint.ordered_delivery and event.ordering_key):
        return {}
    return {"ordering_key": event.ordering_key, "ordering_position": event.created_at}


def claimable_in_order() -> Q:
    """Claim condition: true for unordered deliveries and for the first of their key.

    Only columns of the claimed row are referenced, so the claim stays one plain UPDATE
    whose status condition PostgreSQL re-checks under concurrency.
    """
    earlier_unfinished = Delivery.objects.filter(
        Q(ordering_position__lt=OuterRef("ordering_position"))
        # Equal positions (events inserted by one statement): the lower id goes first, so
        # a key has one head.
        | Q(ordering_position=OuterRef("ordering_position"), pk__lt=OuterRef("pk")),
        endpoint_id=OuterRef("endpoint_id"),
        ordering_key=OuterRef("ordering_key"),
        status__in=BLOCKING,
    )
    # One of a key in flight at a time, whatever its place: a head that was cancelled and
    # retried waits for the successor already sent meanwhile, never overtakes it.
    another_in_flight = Delivery.objects.filter(
        endpoint_id=OuterRef("endpoint_id"),
        ordering_key=OuterRef("ordering_key"),
        status=DeliveryStatus.SENDING,
    ).exclude(pk=OuterRef("pk"))
    # A key is a tenant's: another tenant's event with the same key string is no
    # predecessor (the row's tenant is its event's).
    tenant = Subquery(
        Event.objects.filter(pk=OuterRef(OuterRef("event_id"))).order_by().values("tenant")
    )
    earlier_not_fanned_out = Event.objects.filter(
        Q(tenant=tenant) | (Q(tenant__isnull=True) & Q(IsNull(tenant, True))),
        ordering_key=OuterRef("ordering_key"),
        created_at__lte=OuterRef("ordering_position"),
        fanned_out_at__isnull=True,
    )
    heads = Q(~Exists(earlier_unfinished)) & Q(~Exists(another_in_flight))
    return Q(ordering_key__isnull=True) | (heads & Q(~Exists(earlier_not_fanned_out)))


def next_in_line(*, ordering_key: str, endpoint_ids: Iterable[Any] | None = None) -> list[int]:
    """The head of the key's line per ordered endpoint, when it is pending and due."""
    queryset = Delivery.objects.filter(ordering_key=ordering_key, status__in=BLOCKING)
    if endpoint_ids is not None:
        queryset = queryset.filter(endpoint_id__in=list(endpoint_ids))
    first_per_endpoint: dict[Any, tuple[int, str, bool]] = {}
    # Due by the database's clock, the one every due time is written with.
    due = ExpressionWrapper(Q(next_attempt_at__lte=Now()), output_field=BooleanField())
    rows = (
        queryset.order_by("ordering_position", "id")
        .annotate(due=due)
        .values_list("id", "endpoint_id", "status", "due")[:1000]
    )
    for delivery_id, endpoint_id, status, is_due in rows:
        first_per_endpoint.setdefault(endpoint_id, (delivery_id, status, bool(is_due)))
    return [
        delivery_id
        for delivery_id, status, is_due in first_per_endpoint.values()
        if status == DeliveryStatus.PENDING and is_due
    ]


def endpoints_with_next_due(
    *, ordering_key: str, endpoint_ids: Iterable[Any] | None = None
) -> set[Any]:
    """The endpoints whose line of this key now has a pending, due head (to be woken)."""
    heads = next_in_line(ordering_key=ordering_key, endpoint_ids=endpoint_ids)
    return set(Delivery.objects.filter(pk__in=heads).values_list("endpoint_id", flat=True))
