"""The lease as rows of the database: taking, renewing, releasing and judging it.

The owner holds the endpoint's lease, a row of `EndpointOwner` whose expiry is written
and compared with the database's clock (`Now()`), never a worker's: two workers whose
clocks disagree still agree on who owns what. The rows an owner is sending carry its token
and share its lease (`claims`), so a worker that dies costs one lease, after which the
next owner takes its rows over; an owner that cannot renew stops sending before its lease
ends (`lease`'s guard).
"""

import uuid
from datetime import timedelta
from uuid import UUID

from django.db import IntegrityError, connection
from django.db.models import DurationField, ExpressionWrapper, F, Q
from django.db.models.functions import Now

from deliveries import conf
from deliveries.models import Delivery, DeliveryStatus, EndpointOwner
from webhooks_core.db.sql import sql_cursor


def lease_seconds() -> float:
    return float(conf.get().lease_seconds)


def _until() -> object:
    return Now() + timedelta(seconds=lease_seconds())


def owner_take(*, endpoint_id: UUID | str) -> uuid.UUID | None:
    """Become the endpoint's owner if it has none (or its owner's lease ran out); returns
    the lease's token, or None when another owner holds it, its claims are on hold (an
    open circuit, a rate limit: a countdown wake or the sweeper comes back then), or the
    endpoint is gone."""
    token = uuid.uuid4()
    if _take(endpoint_id, token):
        return token
    try:
        # The endpoint's first owner: its row, then the same conditional take (of two
        # first owners, one wins).
        if not _create_row(endpoint_id):
            return None  # it has one: another owner holds it, or it is on hold
    except IntegrityError:
        return None  # the endpoint was deleted
    if _take(endpoint_id, token):
        return token
    return None


def _create_row(endpoint_id: UUID | str) -> bool:
    """The endpoint's lease row, unless it has one; whether this made it. Raises
    IntegrityError when the endpoint is gone."""
    if _written_sql():
        with sql_cursor([EndpointOwner._meta.db_table]) as cursor:
            cursor.execute(_CREATE_SQL, [str(endpoint_id)])
            return bool(cursor.rowcount)
    if EndpointOwner.objects.filter(endpoint_id=endpoint_id).exists():
        return False
    EndpointOwner.objects.bulk_create(
        [EndpointOwner(endpoint_id=endpoint_id)], ignore_conflicts=True
    )
    return True


def _written_sql() -> bool:
    """Whether the take and the release run as SQL written once (PostgreSQL), not the
    ORM's (every database; the tests run both)."""
    return connection.vendor == "postgresql"


def _take(endpoint_id: UUID | str, token: uuid.UUID) -> bool:
    """The conditional take: the lease is free (never taken, given back or run out) and
    not on hold."""
    if _written_sql():
        with sql_cursor([EndpointOwner._meta.db_table]) as cursor:
            cursor.execute(_TAKE_SQL, [token, lease_seconds(), str(endpoint_id)])
            return bool(cursor.rowcount)
    free = (Q(token__isnull=True) | Q(expires_at__lt=Now())) & (
        Q(not_before__isnull=True) | Q(not_before__lte=Now())
    )
    rows = EndpointOwner.objects.filter(free, endpoint_id=endpoint_id)
    return bool(rows.update(token=token, expires_at=_until(), taken_at=Now()))


def owner_renew(*, endpoint_id: UUID | str, token: uuid.UUID) -> bool:
    """Extend the lease, and the leases of the rows the owner is sending; False when the
    lease is no longer this owner's (it ran out and was taken, or the endpoint is gone).
    The lease first, then the rows, as two statements, as the ORM's form does (the owner
    never runs it beside its own recording: `owner._renew_if_due`)."""
    if _written_sql():
        seconds = lease_seconds()
        with sql_cursor([EndpointOwner._meta.db_table]) as cursor:
            cursor.execute(_RENEW_SQL, [seconds, str(endpoint_id), token])
            if not cursor.rowcount:
                return False
        with sql_cursor([Delivery._meta.db_table]) as cursor:
            cursor.execute(_RENEW_ROWS_SQL, [seconds, str(endpoint_id), token])
        return True
    renewed = EndpointOwner.objects.filter(endpoint_id=endpoint_id, token=token).update(
        expires_at=_until()
    )
    if renewed:
        Delivery.objects.filter(
            endpoint_id=endpoint_id, lease_token=token, status=DeliveryStatus.SENDING
        ).update(lease_expires_at=_until())
    return bool(renewed)


def owner_release(*, endpoint_id: UUID | str, token: uuid.UUID, hold_seconds: float = 0.0) -> None:
    """Give the lease back; with `hold_seconds`, no owner claims before that long."""
    if _written_sql():
        with sql_cursor([EndpointOwner._meta.db_table]) as cursor:
            hold = float(hold_seconds)
            cursor.execute(_RELEASE_SQL, [hold, hold, str(endpoint_id), token])
        return
    not_before = Now() + timedelta(seconds=hold_seconds) if hold_seconds > 0 else None
    EndpointOwner.objects.filter(endpoint_id=endpoint_id, token=token).update(
        token=None, expires_at=None, not_before=not_before
    )


# PostgreSQL's forms of the take (with the lease row's creation), the renewal and the
# release, written once: every turn runs them, and the ORM would compile them again each
# time. `Now()` is STATEMENT_TIMESTAMP() there. The status
# is written into the text, not passed, as in the claims (`claims`).
_OWNERS = EndpointOwner._meta.db_table
_TAKE_SQL = (
    f"UPDATE {_OWNERS} SET token = %s, "  # noqa: S608 (our table)
    "expires_at = STATEMENT_TIMESTAMP() + %s * INTERVAL '1 second', "
    "taken_at = STATEMENT_TIMESTAMP() "
    "WHERE endpoint_id = %s AND (token IS NULL OR expires_at < STATEMENT_TIMESTAMP()) "
    "AND (not_before IS NULL OR not_before <= STATEMENT_TIMESTAMP())"
)
_CREATE_SQL = (
    f"INSERT INTO {_OWNERS} (endpoint_id) VALUES (%s) "  # noqa: S608 (our table)
    "ON CONFLICT (endpoint_id) DO NOTHING"
)
_RENEW_SQL = (
    f"UPDATE {_OWNERS} "  # noqa: S608 (our table)
    "SET expires_at = STATEMENT_TIMESTAMP() + %s * INTERVAL '1 second' "
    "WHERE endpoint_id = %s AND token = %s"
)
_RENEW_ROWS_SQL = (
    f"UPDATE {Delivery._meta.db_table} "  # noqa: S608 (our table)
    "SET lease_expires_at = STATEMENT_TIMESTAMP() + %s * INTERVAL '1 second' "
    f"WHERE endpoint_id = %s AND lease_token = %s AND status = '{DeliveryStatus.SENDING}'"
)
_RELEASE_SQL = (
    f"UPDATE {_OWNERS} SET token = NULL, expires_at = NULL, "  # noqa: S608 (our table)
    "not_before = CASE WHEN %s > 0 THEN STATEMENT_TIMESTAMP() + %s * INTERVAL '1 second' END "
    "WHERE endpoint_id = %s AND token = %s"
)


def held_for(*, endpoint_id: UUID | str) -> float | None:
    """Seconds until an endpoint whose lease nobody holds may be claimed again (its
    claims on hold: an open circuit, a rate limit), or None when it is not on hold."""
    left = (
        EndpointOwner.objects.filter(endpoint_id=endpoint_id, not_before__gt=Now())
        .filter(Q(token__isnull=True) | Q(expires_at__lt=Now()))
        .annotate(left=ExpressionWrapper(F("not_before") - Now(), output_field=DurationField()))
        .values_list("left", flat=True)
        .first()
    )
    return None if left is None else max(left.total_seconds(), 0.0)
