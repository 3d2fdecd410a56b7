"""An endpoint that stopped (disabled or suspended) while its owner worked: what waits for
it is cancelled (disabled) or held (suspended), never left pending or sending."""

import logging
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from deliveries.endpoints.validation import ready as validation_ready
from deliveries.models import Delivery, DeliveryStatus, Endpoint, EndpointState

logger = logging.getLogger("deliveries.pipeline.owner")


def settle_inactive(endpoint_id: str) -> None:
    """Cancel (disabled) or hold (suspended) what waits for the endpoint."""
    now = timezone.now()
    with transaction.atomic():
        # The endpoint's row locked, as every change of its state locks it first: a resume
        # committed before is seen here (nothing to settle), and one that comes after
        # waits for this commit, then releases what this held.
        # FOR NO KEY UPDATE: state changes take the same lock, a delivery's insert (its
        # foreign key's KEY SHARE) is not held up by it.
        state = (
            Endpoint.objects.select_for_update(no_key=True)
            .filter(pk=endpoint_id)
            .values_list("state", flat=True)
            .first()
        )
        waiting = Delivery.objects.filter(endpoint_id=endpoint_id)
        if state == EndpointState.DISABLED:
            waiting.filter(
                status__in=[DeliveryStatus.PENDING, DeliveryStatus.HELD, DeliveryStatus.SENDING]
            ).update(
                status=DeliveryStatus.CANCELLED,
                completed_at=now,
                next_attempt_at=None,
                lease_token=None,
                lease_expires_at=None,
                updated_at=now,
            )
        elif state == EndpointState.SUSPENDED:
            waiting.filter(status__in=[DeliveryStatus.PENDING, DeliveryStatus.SENDING]).update(
                status=DeliveryStatus.HELD, lease_token=None, lease_expires_at=None, updated_at=now
            )


def settle_inactive_endpoints(endpoint_ids: Any) -> None:
    """The sweeper's net for the same (an owner that died before settling)."""
    for endpoint_id in endpoint_ids:
        try:
            settle_inactive(str(endpoint_id))
        except DatabaseError:
            # A deadlock with a lapsed owner's recording, say: the next sweep settles it.
            logger.warning("settling endpoint %s failed; the next sweep tries again", endpoint_id)


def consented_meanwhile(endpoint_id: str) -> bool:
    """Whether an endpoint found awaiting its target's consent has it now."""
    endpoint = Endpoint.objects.filter(pk=endpoint_id).first()
    return endpoint is not None and validation_ready(endpoint)
