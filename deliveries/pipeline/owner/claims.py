"""An owner's claims: the endpoint's due rows, at most as many as it can send now.

A claim is one conditional UPDATE (pending and due, or sending with an expired lease →
sending under the owner's token, sharing its lease): of two claims of one row only one
takes it, and the owner's later writes (`record`) land only while the row still carries
its token. Due times and leases are compared with the database's clock. Ordered rows are
claimed only at the head of their key's line, one per key at a time (`ordering`).
"""

import functools
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import DurationField, ExpressionWrapper, F, Q
from django.db.models.base import Model, ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.functions import Now
from django.db.models.query_utils import DeferredAttribute
from django.db.models.signals import post_init, pre_init

from deliveries.models import (
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointSecret,
    EndpointSigningKey,
    EndpointState,
    Event,
)
from deliveries.pipeline import ordering
from deliveries.pipeline.owner.lease_rows import lease_seconds
from webhooks_core.db.sql import sql_cursor

# The tables our statements read, for `sql_cursor` (prepared once PostgreSQL has their
# statistics).
_DELIVERIES = (Delivery._meta.db_table, Event._meta.db_table)
_ENDPOINTS = (
    Endpoint._meta.db_table,
    EndpointSecret._meta.db_table,
    EndpointSigningKey._meta.db_table,
)


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
        if len(claimed) >= limit or not keyed_waiting(endpoint_id=endpoint.pk):
            return claimed
        # Rows with an ordering key, fanned out while the endpoint asked for order (or a
        # keyed dead letter retried since): they keep their key's order, so they take the
        # ordered path, by the same rule that counts them as due (`has_due`).
        return claimed + _claim_in_order(
            endpoint=endpoint, token=token, limit=limit - len(claimed), with_expired=with_expired
        )
    return _claim_in_order(endpoint=endpoint, token=token, limit=limit, with_expired=with_expired)


def _claim_in_order(
    *, endpoint: Endpoint, token: uuid.UUID, limit: int, with_expired: bool
) -> list[Delivery]:
    """The claim by the ORM's rule: every due row that `ordering.claimable_in_order`
    allows (rows without a key, and the head of each key's line)."""
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


def _picked_sql(with_expired: bool, *, also: str = "") -> str:
    """The due rows of an endpoint without ordering, oldest due first, locked: pending and
    due by the database's clock (and, with `with_expired`, rows whose sender died: an
    owner's first claim takes them over). Placeholders: endpoint, [also's], limit. The
    picked rows are locked, so their status is as read. A materialised CTE, as IN
    (subquery LIMIT n) may be evaluated more than once and take more than n rows.

    The statuses are written into the text, not passed: the statement is prepared, and a
    prepared plan made for any status cannot use the index of pending rows (it read and
    sorted every row of the endpoint to take the first few, so a claim grew with the
    endpoint's backlog)."""
    expired = (
        f" OR (status = '{DeliveryStatus.SENDING}' AND lease_expires_at < STATEMENT_TIMESTAMP())"
        if with_expired
        else ""
    )
    return (
        f"picked AS MATERIALIZED (SELECT id FROM {Delivery._meta.db_table} "  # noqa: S608
        f"WHERE endpoint_id = %s AND ordering_key IS NULL "
        f"AND ((status = '{DeliveryStatus.PENDING}' "
        f"AND next_attempt_at <= STATEMENT_TIMESTAMP()){expired}) "
        f"{also}ORDER BY next_attempt_at, id LIMIT %s "
        f"FOR UPDATE SKIP LOCKED)"
    )


def _take_sql(returning: str) -> str:
    """The picked rows taken: sending under the owner's token, sharing its lease, one
    attempt more. Placeholders: sending, token, lease seconds. The picked ids are looked
    up by primary key as an array: a join with them, planned once for any limit, could be
    a merge or hash join over the whole table."""
    return (
        f"UPDATE {Delivery._meta.db_table} AS d SET status = %s, lease_token = %s, "  # noqa: S608
        f"lease_expires_at = STATEMENT_TIMESTAMP() + %s * INTERVAL '1 second', "
        f"attempts = d.attempts + 1, updated_at = STATEMENT_TIMESTAMP() "
        f"WHERE d.id = ANY(ARRAY(SELECT id FROM picked)) RETURNING {returning}"
    )


@functools.cache
def _unordered_claim_sql(with_expired: bool) -> str:
    """The claim of an endpoint without ordering, as one statement: the same rule as the
    ORM's (pending and due by the database's clock, oldest due first), its SQL written
    once instead of compiled every round (a test holds the two to the same answers)."""
    return f"WITH {_picked_sql(with_expired)} {_take_sql('d.id')}"


def _claim_unordered(
    *, endpoint: Endpoint, token: uuid.UUID, limit: int, with_expired: bool
) -> list[Delivery]:
    params: list[Any] = [endpoint.pk, limit, DeliveryStatus.SENDING, token, lease_seconds()]
    with sql_cursor(_DELIVERIES) as cursor:
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


def keyed_waiting(*, endpoint_id: UUID | str) -> bool:
    """Whether the endpoint has rows with an ordering key waiting to be sent (pending, or
    sending under a lease that may run out): the plain claim of an unordered endpoint
    does not take them."""
    with sql_cursor(_DELIVERIES) as cursor:
        cursor.execute("SELECT " + _KEYED_EXISTS_SQL.format(endpoint="%s"), [str(endpoint_id)])
        (keyed,) = cursor.fetchone()
    return bool(keyed)


_KEYED_EXISTS_SQL = (
    f"EXISTS (SELECT 1 FROM {Delivery._meta.db_table} "  # noqa: S608 (our table)
    "WHERE endpoint_id = {endpoint} AND ordering_key IS NOT NULL "
    f"AND status IN ('{DeliveryStatus.PENDING}', '{DeliveryStatus.SENDING}'))"
)


# The endpoint's health bookkeeping, which its owner's own recording writes (and keeps in
# its copy): nothing a round sends depends on it, so writing it is no new version (else
# every recording would send the owner back to read the endpoint again).
UNVERSIONED_FIELDS = ("consecutive_failures", "last_success_at", "last_failure_at", "failing_since")


# What an owner's cached endpoint is as of: the endpoint row (every column but the health
# bookkeeping, those added later included) and its secrets' and signing keys' rows, hashed
# by the database.
def _version_sql(endpoint_alias: str) -> str:
    secrets, keys = EndpointSecret._meta.db_table, EndpointSigningKey._meta.db_table
    rows = "COALESCE(string_agg(r::text, ',' ORDER BY r.id), '')"
    of_endpoint = f"r WHERE r.endpoint_id = {endpoint_alias}.id"
    column_of = {f.name: f.column for f in Endpoint._meta.concrete_fields}
    columns = [column_of[name] for name in UNVERSIONED_FIELDS]
    unversioned = "ARRAY[" + ", ".join(f"'{column}'" for column in columns) + "]"
    return (
        f"md5((to_jsonb({endpoint_alias}) - {unversioned})::text) || '/' || "  # noqa: S608 (names from the models)
        f"(SELECT md5({rows}) FROM {secrets} {of_endpoint}) || '/' || "
        f"(SELECT md5({rows}) FROM {keys} {of_endpoint})"
    )


def endpoint_version(*, endpoint_id: UUID | str) -> str | None:
    """The endpoint's version (None when it is gone). Read it before the endpoint and its
    secrets: a change between the two reads then shows as a newer version at the next
    claim, never as an old version over newer data."""
    table = Endpoint._meta.db_table
    with sql_cursor(_ENDPOINTS) as cursor:
        cursor.execute(f"SELECT {_version_sql('e')} FROM {table} e WHERE e.id = %s", [endpoint_id])  # noqa: S608
        row = cursor.fetchone()
    return None if row is None else row[0]


def endpoint_state(*, endpoint_id: UUID | str) -> str | None:
    """The endpoint's state (None when it is gone): asked every few seconds by each owner
    whose lanes are all busy, so on PostgreSQL as a statement written once."""
    if connection.vendor != "postgresql":
        return Endpoint.objects.filter(pk=endpoint_id).values_list("state", flat=True).first()
    table = Endpoint._meta.db_table
    with sql_cursor(_ENDPOINTS) as cursor:
        cursor.execute(f"SELECT state FROM {table} WHERE id = %s", [str(endpoint_id)])  # noqa: S608
        row = cursor.fetchone()
    return None if row is None else row[0]


@dataclass(frozen=True)
class RoundClaim:
    """One round's claim: the endpoint's version and state as the claim saw them, and the
    rows it took (none unless the owner's version was the current one and it is active)."""

    version: str | None
    active: bool
    rows: list[Delivery]


def _columns(model: type[Any], alias: str) -> str:
    return ", ".join(f'{alias}."{f.column}"' for f in model._meta.concrete_fields)


@functools.cache
def _round_claim_sql(with_expired: bool) -> str:
    """The claim of `_unordered_claim_sql`, taken only while the owner's endpoint is the
    current one and active, returning the endpoint's version and state, the claimed rows
    and their events: one statement for what a round would otherwise read in four."""
    events, endpoints = Event._meta.db_table, Endpoint._meta.db_table
    current = "AND EXISTS (SELECT 1 FROM ep WHERE ep.state = %s AND ep.version = %s) "
    return (
        f"WITH ep AS MATERIALIZED (SELECT e.state, {_version_sql('e')} AS version, "  # noqa: S608
        f"{_KEYED_EXISTS_SQL.format(endpoint='e.id')} AS keyed "
        f"FROM {endpoints} e WHERE e.id = %s), "
        f"{_picked_sql(with_expired, also=current)}, "
        f"taken AS ({_take_sql('d.*')}) "
        f"SELECT ep.state, ep.version, ep.keyed, "
        f"{_columns(Delivery, 'taken')}, {_columns(Event, 'ev')} "
        f"FROM ep LEFT JOIN (taken JOIN {events} ev ON ev.id = taken.event_id) ON TRUE "
        f'ORDER BY taken."next_attempt_at", taken."id"'
    )


def _field_converters(model: type[Any]) -> tuple[list[str], list[tuple[Any, list[Any]]]]:
    """`model`'s concrete fields' attribute names and, per column, its expression and
    every converter the ORM applies to what the database returns (the backend's, then
    the field's: JSON, for one): the same for every row of one kind of database, so
    found once."""
    key = (model._meta.label, connection.vendor)
    if key not in _FIELD_CONVERTERS:
        fields = model._meta.concrete_fields
        columns = []
        for field in fields:
            expression = field.get_col(model._meta.db_table)
            converters = connection.ops.get_db_converters(expression)
            columns.append((expression, converters + field.get_db_converters(connection)))
        _FIELD_CONVERTERS[key] = ([f.attname for f in fields], columns)
    return _FIELD_CONVERTERS[key]


_FIELD_CONVERTERS: dict[tuple[str, str], tuple[list[str], list[tuple[Any, list[Any]]]]] = {}


def _from_row(model: type[Any], values: list[Any], db: Any) -> Any:
    """A model instance from its concrete columns as the database returned them, with
    the converters the ORM would apply. `db`: the connection itself, not Django's proxy
    of it (whose every use looks the connection up again)."""
    names, columns = _field_converters(model)
    converted = []
    for (expression, converters), value in zip(columns, values, strict=True):
        for converter in converters:
            value = converter(value, expression, db)
        converted.append(value)
    if not _plain_fields(model) or pre_init.has_listeners(model) or post_init.has_listeners(model):
        return model.from_db(db.alias, names, converted)
    # What `from_db` makes, without `Model.__init__`'s work for the general case (its
    # signals, which nobody listens to here, and a descriptor per field that only stores
    # the value), twice per claimed row.
    instance: Any = object.__new__(model)
    instance.__dict__.update(zip(names, converted, strict=True))
    state = instance._state = ModelState()
    state.adding = False
    state.db = db.alias
    return instance


def _plain_fields(model: type[Any]) -> bool:
    """Whether setting each of `model`'s concrete fields is storing its value (the class
    attribute of each is Django's plain one, or a foreign key's, which also forgets a
    cached related object, of which a new instance has none)."""
    label = model._meta.label
    if label not in _PLAIN_FIELDS:
        # Nor a `from_db` or `__init__` of the model's own (one remembering the loaded
        # values, say), which only the general path runs.
        _PLAIN_FIELDS[label] = (
            model.from_db.__func__ is Model.from_db.__func__  # type: ignore[attr-defined]
            and model.__init__ is Model.__init__
            and all(
                type(getattr(model, field.attname, None))
                in (DeferredAttribute, ForeignKeyDeferredAttribute)
                for field in model._meta.concrete_fields
            )
        )
    return _PLAIN_FIELDS[label]


_PLAIN_FIELDS: dict[str, bool] = {}


def claim_round(
    *,
    endpoint: Endpoint,
    version: str,
    token: uuid.UUID,
    limit: int,
    with_expired: bool = False,
) -> RoundClaim:
    """Claim up to `limit` due rows of an unordered endpoint (PostgreSQL) if `version` is
    still the endpoint's, in one statement (see `_round_claim_sql`)."""
    params: list[Any] = [endpoint.pk, endpoint.pk, EndpointState.ACTIVE, version]
    params += [max(limit, 0), DeliveryStatus.SENDING, token, lease_seconds()]
    with sql_cursor(_ENDPOINTS + _DELIVERIES) as cursor:
        cursor.execute(_round_claim_sql(with_expired), params)
        rows = cursor.fetchall()
    if not rows:
        return RoundClaim(None, False, [])
    state, current, keyed = rows[0][0], rows[0][1], rows[0][2]
    width = len(Delivery._meta.concrete_fields)
    db = connections[DEFAULT_DB_ALIAS]
    claimed = []
    for row in rows:
        if row[3] is None:
            continue  # the endpoint's row alone: nothing taken
        delivery = _from_row(Delivery, list(row[3 : 3 + width]), db)
        event = _from_row(Event, list(row[3 + width :]), db)
        Delivery.event.field.set_cached_value(delivery, event)
        delivery.endpoint = endpoint
        claimed.append(delivery)
    active = state == EndpointState.ACTIVE
    if keyed and active and current == version and len(claimed) < limit:
        # Keyed rows left from when the endpoint asked for order (see `claim_due`).
        claimed += _claim_in_order(
            endpoint=endpoint, token=token, limit=limit - len(claimed), with_expired=with_expired
        )
    return RoundClaim(current, active, claimed)


def has_due(*, endpoint_id: UUID | str) -> bool:
    """Whether the endpoint has a row an owner could claim now."""
    rows = Delivery.objects.filter(endpoint_id=endpoint_id).filter(ordering.claimable_in_order())
    return rows.filter(_pending_due() | _lease_expired()).exists()


def next_due_in(*, endpoint_id: UUID | str) -> float | None:
    """Seconds until the endpoint's next pending row falls due (0 if one is due), or None
    when it has none: by the database's clock, the one the claims compare due times with
    (a worker whose clock runs ahead would find rows due that no claim takes)."""
    if connection.vendor == "postgresql":
        wait, keyed = _next_unordered_due(endpoint_id)
        if not keyed:
            return None if wait is None else max(float(wait), 0.0)
    left = (
        Delivery.objects.filter(endpoint_id=endpoint_id, status=DeliveryStatus.PENDING)
        .filter(ordering.claimable_in_order())
        .order_by("next_attempt_at")
        .annotate(left=ExpressionWrapper(F("next_attempt_at") - Now(), DurationField()))
        .values_list("left", flat=True)
        .first()
    )
    return None if left is None else max(left.total_seconds(), 0.0)


def _next_unordered_due(endpoint_id: UUID | str) -> tuple[float | None, bool]:
    """Seconds until the endpoint's first pending row without an ordering key falls due
    (by the database's clock), and whether it has pending rows with one. A row without a
    key is always claimable (see `ordering.claimable_in_order`), so without keyed rows
    this is the ORM's answer, from SQL written once: every lone turn asks it, and
    compiling the ordering rule's subqueries cost more than running them."""
    with sql_cursor(_DELIVERIES) as cursor:
        cursor.execute(_NEXT_UNORDERED_DUE_SQL, [endpoint_id, endpoint_id])
        wait, keyed = cursor.fetchone()
    return wait, keyed


# (The status in the text, as in the claim: the prepared plan then uses the index of
# pending rows.)
_NEXT_UNORDERED_DUE_SQL = (
    "SELECT EXTRACT(EPOCH FROM (SELECT next_attempt_at "  # noqa: S608 (our table)
    f"FROM {Delivery._meta.db_table} "
    f"WHERE endpoint_id = %s AND status = '{DeliveryStatus.PENDING}' AND ordering_key IS NULL "
    "ORDER BY next_attempt_at LIMIT 1) - STATEMENT_TIMESTAMP())::float8, "
    f"EXISTS (SELECT 1 FROM {Delivery._meta.db_table} "
    f"WHERE endpoint_id = %s AND status = '{DeliveryStatus.PENDING}' "
    "AND ordering_key IS NOT NULL)"
)
