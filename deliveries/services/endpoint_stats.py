"""Health figures for the endpoint change list, as subqueries of one SELECT (no N+1)."""

from datetime import datetime, timedelta

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from ..models import Attempt, Delivery, DeliveryStatus, Endpoint

STATS_WINDOW = timedelta(hours=24)


def _count(queryset: QuerySet[Delivery] | QuerySet[Attempt], group_by: str) -> Coalesce:
    counted = queryset.order_by().values(group_by).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def endpoints_with_stats(queryset: QuerySet[Endpoint], *, now: datetime) -> QuerySet[Endpoint]:
    """Annotate attempts_24h, successes_24h, pending_count and dead_lettered_count.

    Separate subqueries rather than joined COUNTs, which would multiply each other's rows.
    """
    attempts = Attempt.objects.filter(
        delivery__endpoint_id=OuterRef("pk"), started_at__gte=now - STATS_WINDOW
    )
    deliveries = Delivery.objects.filter(endpoint_id=OuterRef("pk"))
    return queryset.annotate(
        attempts_24h=_count(attempts, "delivery__endpoint_id"),
        successes_24h=_count(
            attempts.filter(response_status__gte=200, response_status__lt=300),
            "delivery__endpoint_id",
        ),
        pending_count=_count(
            deliveries.filter(
                status__in=[DeliveryStatus.PENDING, DeliveryStatus.SENDING, DeliveryStatus.HELD]
            ),
            "endpoint_id",
        ),
        dead_lettered_count=_count(
            deliveries.filter(status=DeliveryStatus.DEAD_LETTERED), "endpoint_id"
        ),
    )


def success_rate(attempts: int, successes: int) -> float | None:
    """Share of successful attempts, or None when there were none to judge by."""
    return successes / attempts if attempts else None
