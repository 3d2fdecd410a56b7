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

Fan-out keeps the same order for every endpoint (a polling endpoint's feed orders rows by
the fan-out transaction's id): a keyed event is not fanned out while an earlier one of its
key and tenant still waits for its fan-out (``held_back``, read before the fan-out's first
write), for at most ``WEBHOOKS_ORDERING_FAN_OUT_WAIT_SECONDS`` after that one's creation.

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
from datetime import timedelta
from typing import Any

from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, Subquery
from django.db.models.functions import Now
from django.db.models.lookups import IsNull

from deliveries import conf
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
        _still_holds_its_key(),
        Q(tenant=tenant) | (Q(tenant__isnull=True) & Q(IsNull(tenant, True))),
        ordering_key=OuterRef("ordering_key"),
        created_at__lte=OuterRef("ordering_position"),
    )
    heads = Q(~Exists(earlier_unfinished)) & Q(~Exists(another_in_flight))
    return Q(ordering_key__isnull=True) | (heads & Q(~Exists(earlier_not_fanned_out)))


def _still_holds_its_key() -> Q:
    """An event waiting for its fan-out holds the later events of its key, for at most
    `WEBHOOKS_ORDERING_FAN_OUT_WAIT_SECONDS` after its creation (by the database's clock):
    one whose fan-out keeps failing must not hold its key forever."""
    wait = timedelta(seconds=conf.get().ordering_fan_out_wait_seconds)
    return Q(fanned_out_at__isnull=True, created_at__gt=Now() - wait)


def position(event: Event) -> tuple[Any, Any]:
    """An event's place in its key's line: its creation time, then its id."""
    return (event.created_at, event.pk)


def held_back(events: list[Event]) -> set[Any]:
    """The keyed events among `events` (waiting for their fan-out) that an earlier event of
    their key and tenant, not among them and still waiting for its own fan-out, holds back.

    Read only, and asked before the fan-out's first write: see the design page (pull
    delivery) for why that keeps a key's rows in the feed's order."""
    keyed = [event.pk for event in events if event.ordering_key]
    if not keyed:
        return set()
    earlier = Event.objects.filter(
        _still_holds_its_key(),
        Q(created_at__lt=OuterRef("created_at"))
        | Q(created_at=OuterRef("created_at"), pk__lt=OuterRef("pk")),
        Q(tenant=OuterRef("tenant"))
        | (Q(tenant__isnull=True) & Q(IsNull(OuterRef("tenant"), True))),
        ordering_key=OuterRef("ordering_key"),
    ).exclude(pk__in=[event.pk for event in events])
    rows = Event.objects.filter(pk__in=keyed).filter(Exists(earlier))
    return set(rows.values_list("pk", flat=True))


def behind_one_not_taken(events: list[Event], taken: set[Any]) -> set[Any]:
    """Of `events` (in position order), the keyed ones taken whose key and tenant has an
    earlier one among them that was not taken (another fan-out holds it, or did it while
    this one read): they wait for it."""
    stopped: set[tuple[Any, Any]] = set()
    behind = set()
    for event in events:
        if not event.ordering_key:
            continue
        scope = (event.tenant, event.ordering_key)
        if event.pk not in taken:
            stopped.add(scope)
        elif scope in stopped:
            behind.add(event.pk)
    return behind


def waiting_after(events: list[Event], *, limit: int) -> list[Any]:
    """The events still waiting for their fan-out that come after these keyed ones in
    their key and tenant's line (the ones they held back), oldest first, at most `limit`."""
    last: dict[tuple[Any, Any], tuple[Any, Any]] = {}
    for event in events:
        if event.ordering_key:
            scope = (event.tenant, event.ordering_key)
            last[scope] = max(last.get(scope, position(event)), position(event))
    if not last:
        return []
    rows = (
        Event.objects.filter(
            fanned_out_at__isnull=True,
            ordering_key__in={key for _, key in last},
            created_at__gte=min(at for at, _ in last.values()),
        )
        .order_by("created_at", "pk")
        .values_list("pk", "tenant", "ordering_key", "created_at")
    )
    after = [
        pk
        for pk, tenant, key, created_at in rows[:WAITING_READ]
        if (tenant, key) in last and (created_at, pk) > last[(tenant, key)]
    ]
    return after[:limit]


# The most waiting events of the keys `waiting_after` reads (other keys' or tenants' with
# the same key strings among them); any it misses are the sweeper's.
WAITING_READ = 1000


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
