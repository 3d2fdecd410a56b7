"""Reads of endpoints for the pages (admin, portal, API): scoping, health figures, secrets."""

from datetime import datetime, timedelta
from uuid import UUID

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from deliveries.models import (
    Attempt,
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointSecret,
    EndpointState,
    PollRecord,
)

STATS_WINDOW = timedelta(hours=24)


def tenant_endpoints(*, tenant: str) -> QuerySet[Endpoint]:
    """One tenant's endpoints, oldest first (the portal's scope: another tenant's endpoint
    is not in it, so it is a 404 like one that does not exist)."""
    return Endpoint.objects.filter(tenant=tenant).order_by("created_at")


def replayable_endpoints() -> QuerySet[Endpoint]:
    """The endpoints a replay may choose (a disabled one receives nothing)."""
    return Endpoint.objects.exclude(state=EndpointState.DISABLED)


def known_tenants(*, limit: int) -> list[str | None]:
    """The tenants that have an endpoint, in order, at most ``limit`` of them."""
    return list(
        Endpoint.objects.filter(tenant__isnull=False)
        .order_by("tenant")
        .values_list("tenant", flat=True)
        .distinct()[:limit]
    )


def held_deliveries_count(*, endpoint: Endpoint) -> int:
    """The deliveries held while the endpoint was not active (its backlog on resume)."""
    return endpoint.deliveries.filter(status=DeliveryStatus.HELD).count()


def endpoint_signing_secrets(*, endpoint: Endpoint, now: datetime) -> QuerySet[EndpointSecret]:
    """The secrets that sign the endpoint's requests at ``now``, newest first."""
    return endpoint.secrets.unexpired(now).order_by("-created_at", "-pk")


def _count(queryset: QuerySet[Delivery] | QuerySet[Attempt], group_by: str) -> Coalesce:
    counted = queryset.order_by().values(group_by).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def endpoints_with_stats(queryset: QuerySet[Endpoint], *, now: datetime) -> QuerySet[Endpoint]:
    """Annotate attempts_24h, successes_24h, pending_count and dead_lettered_count, as
    subqueries of one SELECT (no N+1).

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


def endpoint_recent_polls(*, endpoint_id: UUID, limit: int = 10) -> list[PollRecord]:
    """The endpoint's newest polls that handed out messages (its consumers' reads)."""
    return list(PollRecord.objects.filter(endpoint_id=endpoint_id).order_by("-at", "-id")[:limit])
