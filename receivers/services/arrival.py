"""Recording an arrived event: one durable row per (source, event id), then processing.

The insert is ``INSERT ... ON CONFLICT DO NOTHING`` (``bulk_create(ignore_conflicts=True)``)
with a primary key chosen here, followed by a read of the row for the key: if the row has
our primary key we inserted it, otherwise it is a duplicate. Two concurrent identical
requests both reach the INSERT; PostgreSQL makes the second wait for the first to commit
and then do nothing, so there is exactly one row and neither request fails.
"""

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from ..models import InboxEvent, InboxStatus, Source
from ..schemes import Envelope
from .enqueue import enqueue_processing

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
    """Store the event unless it is already stored; enqueue processing once it commits.

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
    with transaction.atomic():
        InboxEvent.objects.bulk_create([row], ignore_conflicts=True)
        stored_id, status = InboxEvent.objects.values_list("id", "status").get(
            source=source, event_id=envelope.event_id
        )
        created = stored_id == row.id
        if created and not mismatch:
            # robust: the row is safe even if the broker is down; the sweeper enqueues it.
            transaction.on_commit(lambda: enqueue_processing([row.id]), robust=True)
    if mismatch and created:
        logger.warning(
            "inbox event ignored: %s",
            mismatch,
            extra={"source": source.slug, "event_id": envelope.event_id},
        )
    return Arrival(inbox_id=stored_id, created=created, status=status)
