"""Recording an arrived event: one durable row per (source, event id), then processing.

The insert is one statement, ``INSERT ... ON CONFLICT (source, event id) DO NOTHING
RETURNING id``: a returned row means we inserted it, none means a duplicate (only then is
the stored row read, for its id and status). Two concurrent identical requests both reach
the INSERT; PostgreSQL makes the second wait for the first to commit and then do nothing,
so there is exactly one row and neither request fails.

Outside a transaction (the receiving view) the statement commits by itself, so the row is
durable when it returns, without a BEGIN/COMMIT round trip each. Inside a caller's
transaction it is part of that transaction, and processing is dispatched on its commit.
"""

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.db import connections, router, transaction
from django.db.models import Field
from django.utils import timezone

from ..models import InboxEvent, InboxStatus, Source
from ..schemes import Envelope
from .dispatch import dispatch_processing_soon

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
    *, source: Source, envelope: Envelope, headers: Mapping[str, str], raw_body: bytes
) -> Arrival:
    """Store the event unless it is already stored; dispatch processing once it commits.

    An event from the wrong account or mode is stored as ``ignored`` with the reason, so
    it is acknowledged (the provider stops retrying) and visible, but never processed.
    """
    now = timezone.now()
    mismatch = expectation_mismatch(source, envelope)
    row = InboxEvent(
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
        enqueued_at=None if mismatch else now,
        processed_at=now if mismatch else None,
    )
    created = _insert_unless_stored(row)
    if created:
        stored_id, status = row.id, row.status
        if not mismatch:
            # robust: the row is safe even if the broker is down; the sweeper dispatches it.
            transaction.on_commit(lambda: dispatch_processing_soon(row.id), robust=True)
    else:
        stored_id, status = InboxEvent.objects.values_list("id", "status").get(
            source=source, event_id=envelope.event_id
        )
    if mismatch and created:
        logger.warning(
            "inbox event ignored: %s",
            mismatch,
            extra={"source": source.slug, "event_id": envelope.event_id},
        )
    return Arrival(inbox_id=stored_id, created=created, status=status)


def inbox_record_batch(
    *,
    source: Source,
    envelopes: Sequence[Envelope],
    headers: Mapping[str, str],
    raw_body: bytes,
) -> list[Arrival]:
    """Store the events of one request (a provider's batch) in one transaction.

    Each event is its own row, deduplicated on its own id, so a repeated batch adds no row
    and an event seen in an earlier batch is not stored twice. Each row keeps its event's
    own bytes (``Envelope.raw_body``) when the scheme gives them, else the request's body.
    Rows are inserted in event-id order: two concurrent batches sharing events lock them
    in the same order, so they wait for each other instead of deadlocking. Processing of
    every new row is dispatched when the transaction commits; the arrivals come back in the
    order of ``envelopes``.
    """
    order = sorted(range(len(envelopes)), key=lambda index: envelopes[index].event_id)
    arrivals: dict[int, Arrival] = {}
    with transaction.atomic():
        for index in order:
            envelope = envelopes[index]
            arrivals[index] = inbox_record(
                source=source,
                envelope=envelope,
                headers=headers,
                raw_body=raw_body if envelope.raw_body is None else envelope.raw_body,
            )
    return [arrivals[index] for index in range(len(envelopes))]


def _insert_unless_stored(row: InboxEvent) -> bool:
    """Insert ``row`` unless its (source, event id) is stored; whether it was inserted."""
    connection = connections[router.db_for_write(InboxEvent)]
    sql, fields = _insert_statement(connection.alias)
    params = [field.get_db_prep_save(field.pre_save(row, True), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None


@lru_cache(maxsize=8)
def _insert_statement(alias: str) -> tuple[str, list[Field[Any, Any]]]:
    # Built once from the model, so a new column cannot be forgotten here.
    quote = connections[alias].ops.quote_name
    fields = list(InboxEvent._meta.concrete_fields)
    columns = ", ".join(quote(str(field.column)) for field in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    unique = ", ".join(quote(name) for name in ("source_id", "event_id"))
    # Only names from the model's metadata are formatted in; every value is a parameter.
    sql = (
        f"INSERT INTO {quote(InboxEvent._meta.db_table)} ({columns}) "  # noqa: S608
        f"VALUES ({placeholders}) ON CONFLICT ({unique}) DO NOTHING RETURNING {quote('id')}"
    )
    return sql, fields
