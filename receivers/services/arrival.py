"""Recording an arrived event: one durable row per (source, event id), then processing.

The insert is one statement, ``INSERT ... ON CONFLICT DO NOTHING RETURNING id``: a
returned row means we inserted it, none means a duplicate (only then is the stored row
read, for its id and status). Two unique constraints make a duplicate: (source, event
id), and (source, signed digest) for the schemes that sign no timestamp, where the id
comes from a header the provider does not sign. A batch is one statement too.

Two concurrent identical requests both reach the INSERT; PostgreSQL makes the second
wait for the first to commit and then do nothing, so there is exactly one row and neither
request fails.

Outside a transaction (the receiving view) the statement commits by itself, so the row is
durable when it returns, without a BEGIN/COMMIT round trip each. Inside a caller's
transaction it is part of that transaction, and processing is dispatched on its commit.
"""

import base64
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from django.db import connections, router, transaction
from django.db.models import BinaryField, Field, JSONField
from django.utils import timezone

from receivers.models import InboxEvent, InboxStatus, Source
from receivers.schemes import Envelope
from receivers.services.dispatch import dispatch_processing_soon

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Arrival:
    inbox_id: uuid.UUID
    created: bool
    status: str


def expectation_mismatch(source: Source, envelope: Envelope) -> str:
    """Why an authentic event must not touch this source's data ('' if it may)."""
    if source.expected_mode and envelope.mode and envelope.mode != source.expected_mode:
        return f"mode {envelope.mode!r} but this source expects {source.expected_mode!r}"
    if source.expected_account and envelope.account != source.expected_account:
        return f"account {envelope.account or '(none)'!r} is not the expected account"
    return ""


def inbox_record(
    *,
    source: Source,
    envelope: Envelope,
    headers: Mapping[str, str],
    raw_body: bytes,
    signed_digest: str = "",
) -> Arrival:
    """Store the event unless it is already stored; dispatch processing once it commits.

    ``signed_digest``: the SHA-256 of what the provider signed, for a scheme that signs no
    timestamp; a stored row with the same digest makes this a duplicate too, whatever
    unsigned id or type the request carries.
    An event from the wrong account or mode is stored as ``ignored`` with the reason, so
    it is acknowledged (the provider stops retrying) and visible, but never processed.
    """
    row = _row(source, envelope, headers, raw_body, timezone.now())
    row.signed_digest = signed_digest or None
    created = _insert_unless_stored(row)
    if created:
        stored_id, status = row.id, row.status
        if row.status == InboxStatus.RECEIVED:
            # robust: the row is safe even if the broker is down; the sweeper dispatches it.
            transaction.on_commit(lambda: dispatch_processing_soon(row.id), robust=True)
    else:
        stored_id, status = _stored(source, envelope.event_id, signed_digest)
    if created and row.last_error:
        logger.warning(
            "inbox event ignored: %s",
            row.last_error,
            extra={"source": source.slug, "event_id": envelope.event_id},
        )
    return Arrival(inbox_id=stored_id, created=created, status=status)


def _row(
    source: Source,
    envelope: Envelope,
    headers: Mapping[str, str],
    raw_body: bytes,
    now: datetime,
) -> InboxEvent:
    mismatch = expectation_mismatch(source, envelope)
    return InboxEvent(
        id=uuid.uuid4(),
        source=source,
        event_id=envelope.event_id,
        type=envelope.type,
        status=InboxStatus.IGNORED if mismatch else InboxStatus.RECEIVED,
        last_error=mismatch,
        headers=dict(headers),
        raw_body=raw_body,
        payload=envelope.payload,
        provider_timestamp=envelope.provider_timestamp,
        received_at=now,
        next_attempt_at=None if mismatch else now,
        dispatched_at=None if mismatch else now,
        processed_at=now if mismatch else None,
    )


def _stored(source: Source, event_id: str, signed_digest: str) -> tuple[uuid.UUID, str]:
    """The stored row a duplicate landed on: by its id, else by its signed material."""
    stored = InboxEvent.objects.filter(source=source, event_id=event_id)
    found = stored.values_list("id", "status").first()
    if found is None and signed_digest:
        by_digest = InboxEvent.objects.filter(source=source, signed_digest=signed_digest)
        found = by_digest.values_list("id", "status").first()
    if found is None:
        raise InboxEvent.DoesNotExist(f"no stored row for {event_id!r}")
    return found


def inbox_record_batch(
    *,
    source: Source,
    envelopes: Sequence[Envelope],
    headers: Mapping[str, str],
    raw_body: bytes,
    signed_digest: str = "",
) -> list[Arrival]:
    """Store the events of one request (a provider's batch) in one statement.

    Each event is its own row, deduplicated on its own id, so a repeated batch adds no row
    and an event seen in an earlier batch is not stored twice. ``signed_digest`` (of the
    whole signed batch) is kept on one of its rows and looked up first: a replayed batch
    costs one lookup (and one read of its rows' ids), not an insert of every event.
    Each row keeps its event's own bytes (``Envelope.raw_body``) when the scheme gives
    them, else the request's body. Rows are inserted in event-id order: two concurrent
    batches sharing events lock them in the same order, so they wait for each other
    instead of deadlocking. Processing of every new row is dispatched when the
    transaction commits; the arrivals come back in the order of ``envelopes``.
    """
    if (
        signed_digest
        and InboxEvent.objects.filter(source=source, signed_digest=signed_digest).exists()
    ):
        return _duplicates(source, envelopes)
    now = timezone.now()
    order = sorted(range(len(envelopes)), key=lambda index: envelopes[index].event_id)
    rows = {
        index: _row(source, envelopes[index], headers, envelopes[index].raw_body or raw_body, now)
        for index in order
    }
    if signed_digest and order:
        rows[order[0]].signed_digest = signed_digest
    with transaction.atomic():
        created = _insert_many([rows[index] for index in order])
        stored = {row.event_id: (row.id, row.status) for row in rows.values() if row.id in created}
        missing = [e.event_id for e in envelopes if e.event_id not in stored]
        if missing:
            stored.update(
                (event_id, (row_id, status))
                for event_id, row_id, status in InboxEvent.objects.filter(
                    source=source, event_id__in=missing
                ).values_list("event_id", "id", "status")
            )
        new = [row.id for row in rows.values() if row.id in created and not row.last_error]
        if new:
            transaction.on_commit(lambda: _dispatch_all(new), robust=True)
    return [
        Arrival(
            inbox_id=stored[envelope.event_id][0],
            created=rows[index].id in created,
            status=stored[envelope.event_id][1],
        )
        for index, envelope in enumerate(envelopes)
    ]


def _dispatch_all(inbox_ids: list[uuid.UUID]) -> None:
    for inbox_id in inbox_ids:
        dispatch_processing_soon(inbox_id)


def _duplicates(source: Source, envelopes: Sequence[Envelope]) -> list[Arrival]:
    stored = dict(
        (event_id, (row_id, status))
        for event_id, row_id, status in InboxEvent.objects.filter(
            source=source, event_id__in=[e.event_id for e in envelopes]
        ).values_list("event_id", "id", "status")
    )
    return [
        Arrival(inbox_id=stored[e.event_id][0], created=False, status=stored[e.event_id][1])
        for e in envelopes
    ]


def _insert_unless_stored(row: InboxEvent) -> bool:
    """Insert ``row`` unless its (source, event id) or (source, signed digest) is stored;
    whether it was inserted."""
    connection = connections[router.db_for_write(InboxEvent)]
    sql, fields = _insert_statement(connection.alias)
    params = [field.get_db_prep_save(field.pre_save(row, True), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None


def _insert_many(rows: list[InboxEvent]) -> set[uuid.UUID]:
    """Insert the rows whose (source, event id) is not stored yet; the ids inserted.

    On PostgreSQL one statement, the rows passed as one JSON document (as the sending
    side records its attempts); elsewhere the ORM's ``bulk_create`` ignoring conflicts,
    then one read of which ids are there.
    """
    if not rows:
        return set()
    connection = connections[router.db_for_write(InboxEvent)]
    if connection.vendor != "postgresql":
        InboxEvent.objects.bulk_create(rows, ignore_conflicts=True)
        ids = [row.id for row in rows]
        return set(InboxEvent.objects.filter(id__in=ids).values_list("id", flat=True))
    sql, fields = _insert_many_statement(connection.alias)
    document = json.dumps(
        [{field.column: _json_value(field, row, connection) for field in fields} for row in rows],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [document])
        return {uuid.UUID(str(value)) for (value,) in cursor.fetchall()}


def _json_value(field: Field[Any, Any], row: InboxEvent, connection: Any) -> Any:
    value = field.pre_save(row, True)
    if value is None:
        return None
    if isinstance(field, BinaryField):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(field, JSONField):
        return value
    prepared = field.get_db_prep_save(value, connection)
    return prepared.isoformat() if isinstance(prepared, datetime) else str(prepared)


@lru_cache(maxsize=8)
def _insert_statement(alias: str) -> tuple[str, list[Field[Any, Any]]]:
    # Built once from the model, so a new column cannot be forgotten here.
    quote = connections[alias].ops.quote_name
    fields = list(InboxEvent._meta.concrete_fields)
    columns = ", ".join(quote(str(field.column)) for field in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    # No conflict target: either unique constraint (event id, signed digest) makes it a
    # duplicate. Only names from the model's metadata are formatted in; every value is a
    # parameter.
    sql = (
        f"INSERT INTO {quote(InboxEvent._meta.db_table)} ({columns}) "  # noqa: S608
        f"VALUES ({placeholders}) ON CONFLICT DO NOTHING RETURNING {quote('id')}"
    )
    return sql, fields


@lru_cache(maxsize=8)
def _insert_many_statement(alias: str) -> tuple[str, list[Field[Any, Any]]]:
    connection = connections[alias]
    quote = connection.ops.quote_name
    fields = list(InboxEvent._meta.concrete_fields)
    columns = ", ".join(quote(str(field.column)) for field in fields)
    # JSON columns are read as jsonb, bytes as base64 text; the rest as text, cast.
    declared = ", ".join(
        f"{quote(str(f.column))} {'jsonb' if isinstance(f, JSONField) else 'text'}" for f in fields
    )
    values = ", ".join(_read_as(f, quote(str(f.column)), connection) for f in fields)
    sql = (
        f"INSERT INTO {quote(InboxEvent._meta.db_table)} ({columns}) "  # noqa: S608
        f"SELECT {values} FROM json_to_recordset(%s::json) AS r({declared}) "
        f"ORDER BY r.{quote('event_id')} ON CONFLICT DO NOTHING RETURNING {quote('id')}"
    )
    return sql, fields


def _read_as(field: Field[Any, Any], column: str, connection: Any) -> str:
    if isinstance(field, JSONField):
        return f"r.{column}"
    if isinstance(field, BinaryField):
        return f"decode(r.{column}, 'base64')"
    return f"r.{column}::{field.db_type(connection)}"
