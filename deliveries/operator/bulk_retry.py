"""Recovery: send again what failed for a tenant since a time (the portal's "recover")."""

from datetime import datetime
from uuid import UUID

from deliveries.operator.retry import DeliveryNotRetryable, delivery_retry
from deliveries.selectors.deliveries import failed_deliveries


def deliveries_recover(*, tenant: str, since: datetime, endpoint_id: UUID | None = None) -> int:
    """Retry each failed delivery (`delivery_retry`: fresh cycle, normal sending path).

    Returns how many were queued again; one that changed state meanwhile is skipped.
    """
    queued = 0
    ids = failed_deliveries(tenant=tenant, since=since, endpoint_id=endpoint_id).values_list(
        "pk", flat=True
    )
    for delivery_id in list(ids):
        try:
            delivery_retry(delivery_id=delivery_id)
        except DeliveryNotRetryable:
            continue
        queued += 1
    return queued
