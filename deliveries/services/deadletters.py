"""The dead-letter queue's own action; "retry now" is `delivery_retry` (sending.py)."""

from django.utils import timezone

from ..models import Delivery, DeliveryStatus

# A delivery in flight ("sending") is left alone: its worker owns it until the lease ends.
CANCELLABLE = (DeliveryStatus.DEAD_LETTERED, DeliveryStatus.PENDING, DeliveryStatus.HELD)


def delivery_cancel(*, delivery_id: int) -> bool:
    """Give up on a delivery for good. False when it was in flight or already finished.

    A pending delivery's task message may still be out; its claim finds the row cancelled
    and sends nothing.
    """
    now = timezone.now()
    return bool(
        Delivery.objects.filter(pk=delivery_id, status__in=CANCELLABLE).update(
            status=DeliveryStatus.CANCELLED, completed_at=now, next_attempt_at=None, updated_at=now
        )
    )
