"""Reads of events, deliveries and attempts for the pages (admin, portal, API).

A caller that serves a tenant starts from that tenant's rows (`tenant_deliveries`, or the
API's token scope over `TENANT_FIELD`) and narrows them here; nothing here widens them.
"""

from datetime import datetime
from uuid import UUID

from django.db.models import Prefetch, QuerySet

from deliveries.models import Attempt, Delivery, DeliveryStatus, EndpointState, Event
from deliveries.pipeline.event_types import TEST_EVENT_TYPE

#: The lookup from a delivery to its tenant. Fan-out gives an event's deliveries to its
#: own tenant's endpoints only, so the endpoint's tenant is the delivery's.
TENANT_FIELD = "endpoint__tenant"


def tenant_deliveries(*, tenant: str) -> QuerySet[Delivery]:
    """One tenant's deliveries (the portal's scope)."""
    return Delivery.objects.filter(**{TENANT_FIELD: tenant})


def deliveries_filtered(
    deliveries: QuerySet[Delivery],
    *,
    status: str | None = None,
    endpoint_id: UUID | str | None = None,
    event_id: UUID | None = None,
    event_type: str | None = None,
    since: datetime | None = None,
    tenant: str | None = None,
) -> QuerySet[Delivery]:
    """``deliveries`` narrowed by each filter given (None: not filtered by it): the
    delivery lists of the API and of the portal."""
    if status is not None:
        deliveries = deliveries.filter(status=status)
    if endpoint_id is not None:
        deliveries = deliveries.filter(endpoint_id=endpoint_id)
    if event_id is not None:
        deliveries = deliveries.filter(event_id=event_id)
    if event_type is not None:
        deliveries = deliveries.filter(event__type=event_type)
    if since is not None:
        deliveries = deliveries.filter(created_at__gte=since)
    if tenant is not None:
        deliveries = deliveries.filter(**{TENANT_FIELD: tenant})
    return deliveries


def delivery_details(deliveries: QuerySet[Delivery]) -> QuerySet[Delivery]:
    """What a delivery's page shows, loaded with it: its event, endpoint and attempts."""
    return deliveries.select_related("event", "endpoint").prefetch_related("attempt_set")


def endpoint_recent_deliveries(
    deliveries: QuerySet[Delivery], *, endpoint_id: UUID, limit: int = 10
) -> list[Delivery]:
    """The endpoint's newest deliveries among ``deliveries``, with their events."""
    return list(
        deliveries.filter(endpoint_id=endpoint_id)
        .select_related("event")
        .order_by("-created_at", "-id")[:limit]
    )


def recent_test_deliveries(*, endpoint_id: UUID, limit: int = 5) -> list[Delivery]:
    """The endpoint's newest ``webhook.test`` deliveries, with their attempts."""
    return list(
        Delivery.objects.filter(endpoint_id=endpoint_id, event__type=TEST_EVENT_TYPE)
        .prefetch_related("attempt_set")
        .order_by("-created_at")[:limit]
    )


def failed_deliveries(
    *, tenant: str, since: datetime, endpoint_id: UUID | None = None
) -> QuerySet[Delivery]:
    """The tenant's dead-lettered deliveries created since ``since``, to active endpoints
    (a suspended or disabled endpoint would refuse the retry): what "recover" sends again."""
    failed = tenant_deliveries(tenant=tenant).filter(
        endpoint__state=EndpointState.ACTIVE,
        status=DeliveryStatus.DEAD_LETTERED,
        created_at__gte=since,
    )
    if endpoint_id is not None:
        failed = failed.filter(endpoint_id=endpoint_id)
    return failed


def events_with_deliveries() -> QuerySet[Event]:
    """Events, each with its deliveries in one more query for all of them."""
    return Event.objects.prefetch_related("deliveries")


def event_timeline(*, event: Event) -> QuerySet[Delivery]:
    """The event's deliveries in order, each with its endpoint and its attempts by number."""
    return (
        Delivery.objects.filter(event=event)
        .select_related("endpoint")
        .prefetch_related(Prefetch("attempt_set", queryset=Attempt.objects.order_by("number")))
        .order_by("created_at", "id")
    )


def event_types_seen(*, limit: int) -> list[str]:
    """The types of the events stored, in order, at most ``limit`` of them."""
    return list(Event.objects.order_by("type").values_list("type", flat=True).distinct()[:limit])
