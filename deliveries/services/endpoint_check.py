"""`webhook.test`: an operator checks one endpoint end to end with a harmless event."""

import uuid
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from ..models import Delivery, DeliveryStatus, Endpoint, EndpointState, Event
from .dispatch import dispatch_wakes

TEST_EVENT_TYPE = "webhook.test"


class EndpointNotActive(Exception):
    """A test event would be held, not sent: the endpoint is suspended or disabled."""


def endpoint_send_test_event(*, endpoint_id: UUID, requested_by: str = "") -> Delivery:
    """Send a `webhook.test` event to this endpoint only, through the normal sending path.

    The event is written already fanned out, so no other endpoint (not even one subscribed
    to ``*``) receives it, and the sweeper never fans it out later.
    """
    now = timezone.now()
    with transaction.atomic():
        endpoint = Endpoint.objects.select_for_update().get(pk=endpoint_id)
        if endpoint.state != EndpointState.ACTIVE:
            raise EndpointNotActive(f"endpoint is {endpoint.state}")
        event = Event.objects.create(
            id=uuid.uuid4(),
            type=TEST_EVENT_TYPE,
            occurred_at=now,
            data={"endpoint_id": str(endpoint.pk), "requested_by": requested_by, "test": True},
            fanned_out_at=now,
            tenant=endpoint.tenant,
        )
        delivery = Delivery.objects.create(
            event=event,
            endpoint=endpoint,
            status=DeliveryStatus.PENDING,
            next_attempt_at=now,
        )
        transaction.on_commit(lambda: dispatch_wakes([endpoint.pk]), robust=True)
    return delivery


def recent_test_deliveries(*, endpoint_id: UUID, limit: int = 5) -> list[Delivery]:
    return list(
        Delivery.objects.filter(endpoint_id=endpoint_id, event__type=TEST_EVENT_TYPE)
        .prefetch_related("attempt_set")
        .order_by("-created_at")[:limit]
    )
