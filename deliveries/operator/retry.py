"""The operator's "retry now": a delivery due again at once, in a fresh retry cycle."""

from django.db import transaction
from django.db.models.functions import Now

from deliveries.models import Delivery, DeliveryStatus, EndpointState
from deliveries.pipeline.wake import wake_endpoints


class DeliveryNotRetryable(Exception):
    """The delivery is in flight, held or already delivered; a retry would not be right."""


#: Why a succeeded delivery is not retried (the API answers it with 409).
ALREADY_DELIVERED = (
    "delivery already succeeded; to send a delivered event again, create a replay "
    "(POST /api/v1/replays, or Replays in the admin)"
)


def delivery_retry(*, delivery_id: int) -> Delivery:
    """Send a delivery again now, with a fresh retry cycle (operator or API action).

    Works for dead-lettered, cancelled and pending deliveries; the request goes through
    the endpoint's owner, with the same claim, signing and backoff as any other. A
    succeeded delivery is not sent again by a retry (a double click or a scripted retry
    would re-deliver on purpose-less grounds): a replay is the explicit, recorded way to
    do that.
    """
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update(of=("self",))
            .select_related("endpoint")
            .get(pk=delivery_id)
        )
        if delivery.status == DeliveryStatus.SUCCEEDED:
            raise DeliveryNotRetryable(ALREADY_DELIVERED)
        if delivery.status in (DeliveryStatus.SENDING, DeliveryStatus.HELD):
            raise DeliveryNotRetryable(f"delivery is {delivery.status}")
        if delivery.endpoint.state != EndpointState.ACTIVE:
            raise DeliveryNotRetryable(f"endpoint is {delivery.endpoint.state}")
        delivery.status = DeliveryStatus.PENDING
        delivery.attempts_before_cycle = delivery.attempts
        delivery.first_attempt_at = None
        delivery.completed_at = None
        delivery.next_attempt_at = Now()  # due by the database's clock, the claims' one
        delivery.save()
        delivery.refresh_from_db(fields=["next_attempt_at"])
        transaction.on_commit(lambda: wake_endpoints([delivery.endpoint_id]), robust=True)
    return delivery
