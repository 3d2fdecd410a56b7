"""An owner's claims: the endpoint's due rows, at most as many as it can send now.

A claim is one conditional UPDATE (pending and due, or sending with an expired lease →
sending under the owner's token, sharing its lease): of two claims of one row only one
takes it, and the owner's later writes (`recording`) land only while the row still carries
its token. Due times and leases are compared with the database's clock. Ordered rows are
claimed only at the head of their key's line, one per key at a time (`ordering`).
"""

import functools
import uuid
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import F, Q
from django.db.models.functions import Now
from django.utils import timezone

from .. import ordering
from ..models import Delivery, DeliveryStatus, Endpoint
from .ownership import lease_seconds


def _pending_due() -> Q:
    return Q(status=DeliveryStatus.PENDING, next_attempt_at__lte=Now())


def _lease_expired() -> Q:
    return Q(status=DeliveryStatus.SENDING, lease_expires_at__lt=Now())


def claim_due(
    *, endpoint: Endpoint, token: uuid.UUID, limit: int, with_expired: bool = False
) -> list[Delivery]:
    """Claim up to `limit` due rows of the endpoint, oldest due first (and, with
    `with_expired`, rows whose sender died: an owner's first claim). Each returned row
    shares `endpoint` (the instance its owner read this round)."""
    if limit <= 0:
        return []
    if not endpoint.ordered_delivery and connection.vendor == "postgresql":
        claimed = _claim_unordered(
            endpoint=endpoint, token=token, limit=limit, with_expired=with_expired
        )
        if claimed or not with_expired:
            return claimed
        # An owner's first claim found nothing plain: rows with an ordering key, left from
        # when the endpoint asked for order, take the ordered path.
    rows = Delivery.objects.filter(endpoint_id=endpoint.pk).filter(ordering.claimable_in_order())
    ids = list(
        rows.filter(_pending_due())
        .order_by("next_attempt_at", "pk")
        .values_list("pk", flat=True)[:limit]
    )
    if with_expired and len(ids) < limit:
        ids += list(
            rows.filter(_lease_expired())
            .exclude(pk__in=ids)
            .order_by("pk")
            .values_list("pk", flat=True)[: limit - len(ids)]
        )
    if not ids:
        return []
    taken = Delivery.objects.filter(_pending_due() | _lease_expired(), pk__in=ids).update(
        status=DeliveryStatus.SENDING,
        lease_token=token,
        lease_expires_at=Now() + timedelta(seconds=lease_seconds()),
        attempts=F("attempts") + 1,
        updated_at=Now(),
    )
    if not taken:
        return []
    claimed = list(
        Delivery.objects.select_related("event")
        .filter(pk__in=ids, lease_token=token, status=DeliveryStatus.SENDING)
        .order_by("next_attempt_at", "pk")
    )
    for delivery in claimed:
        delivery.endpoint = endpoint
    return claimed


@functools.cache
def _unordered_claim_sql(with_expired: bool) -> str:
    """The claim of an endpoint without ordering, as one statement: the same rule as the
    ORM's (pending and due by the database's clock, oldest due first), its SQL written
    once instead of compiled every round (a test holds the two to the same answers)."""
    table = Delivery._meta.db_table
    # A row whose sender died (its lease ran out): an owner's first claim takes it over.
    expired = (
        f" OR (status = '{DeliveryStatus.SENDING}' AND lease_expires_at < STATEMENT_TIMESTAMP())"
        if with_expired
        else ""
    )
    # The picked rows are locked, so their status is as read. A materialised CTE, as
    # IN (subquery LIMIT n) may be evaluated more than once and take more than n rows.
    return (
        f"WITH picked AS MATERIALIZED (SELECT id FROM {table} "  # noqa: S608 (placeholders)
        f"WHERE endpoint_id = %s AND ordering_key IS NULL "
        f"AND ((status = %s AND next_attempt_at <= STATEMENT_TIMESTAMP()){expired}) "
        f"ORDER BY next_attempt_at, id LIMIT %s "
        f"FOR UPDATE SKIP LOCKED) "
        f"UPDATE {table} AS d SET status = %s, lease_token = %s, "
        f"lease_expires_at = STATEMENT_TIMESTAMP() + %s * INTERVAL '1 second', "
        f"attempts = d.attempts + 1, updated_at = STATEMENT_TIMESTAMP() "
        f"FROM picked WHERE d.id = picked.id RETURNING d.id"
    )


def _claim_unordered(
    *, endpoint: Endpoint, token: uuid.UUID, limit: int, with_expired: bool
) -> list[Delivery]:
    pending, sending = DeliveryStatus.PENDING, DeliveryStatus.SENDING
    params: list[Any] = [endpoint.pk, pending, limit, sending, token, lease_seconds()]
    with connection.cursor() as cursor:
        cursor.execute(_unordered_claim_sql(with_expired), params)
        ids = [row[0] for row in cursor.fetchall()]
    if not ids:
        return []
    claimed = list(
        Delivery.objects.select_related("event")
        .filter(pk__in=ids)
        .order_by("next_attempt_at", "pk")
    )
    for delivery in claimed:
        delivery.endpoint = endpoint
    return claimed


def has_due(*, endpoint_id: UUID | str) -> bool:
    """Whether the endpoint has a row an owner could claim now."""
    rows = Delivery.objects.filter(endpoint_id=endpoint_id).filter(ordering.claimable_in_order())
    return rows.filter(_pending_due() | _lease_expired()).exists()


def next_due_in(*, endpoint_id: UUID | str) -> float | None:
    """Seconds until the endpoint's next pending row falls due (0 if one is due), or None
    when it has none."""
    first = (
        Delivery.objects.filter(endpoint_id=endpoint_id, status=DeliveryStatus.PENDING)
        .filter(ordering.claimable_in_order())
        .order_by("next_attempt_at")
        .values_list("next_attempt_at", flat=True)
        .first()
    )
    if first is None:
        return None
    return max((first - timezone.now()).total_seconds(), 0.0)
