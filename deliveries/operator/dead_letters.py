"""The dead-letter queue's own action; "retry now" is `delivery_retry` (retry.py)."""

from django.db import transaction
from django.utils import timezone

from deliveries.models import Delivery, DeliveryStatus
from deliveries.pipeline.wake import wake_endpoints

# A delivery in flight ("sending") is left alone: its worker owns it until the lease ends.
CANCELLABLE = (DeliveryStatus.DEAD_LETTERED, DeliveryStatus.PENDING, DeliveryStatus.HELD)


def delivery_cancel(*, delivery_id: int) -> bool:
    """Give up on a delivery for good. False when it was in flight or already finished.

    A pending delivery's owner, claiming later, finds the row cancelled and sends
    nothing. Cancelling the head of an ordering key's line lets the rest of the line go
    on.
    """
    now = timezone.now()
    with transaction.atomic():
        cancelled = Delivery.objects.filter(pk=delivery_id, status__in=CANCELLABLE).update(
            status=DeliveryStatus.CANCELLED, completed_at=now, next_attempt_at=None, updated_at=now
        )
        row = Delivery.objects.filter(pk=delivery_id).values("ordering_key", "endpoint_id").first()
        if cancelled and row and row["ordering_key"]:
            # The rest of the key's line may go now: the owner claims its new head.
            endpoint_id = row["endpoint_id"]
            transaction.on_commit(lambda: wake_endpoints([endpoint_id]), robust=True)
    return bool(cancelled)
