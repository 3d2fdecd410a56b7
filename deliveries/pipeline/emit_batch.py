"""What one product transaction emitted, fanned out by one flush after its commit."""

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction

from deliveries.pipeline import fanout_mark

logger = logging.getLogger(__name__)


@dataclass
class EmitBatch:
    """What one product transaction emitted, seen to by one flush after its commit: the
    events fanned out right there, in this process (few endpoints), and the others left
    to the fan-out task (a message only when none is out: `fanout_mark`)."""

    # The events themselves (as inserted: the fan-out needs no read of them), and the
    # ids of the others.
    inline_events: list[Any] = field(default_factory=list)
    event_ids: list[UUID] = field(default_factory=list)
    fan_out_inline: Any = None  # the fan-out's entry point, set by whoever fills the batch
    # When the first event was inserted (the database's time), if known.
    inserted_at: datetime | None = None

    def flush(self) -> None:
        later = list(self.event_ids)
        if self.inline_events:
            try:
                later += self.fan_out_inline(self.inline_events)
            except Exception:
                # After the product's commit: its transaction is safe whatever happens
                # here, and the fan-out task (or the sweeper) does the rest.
                logger.exception("fanning events out after their commit failed")
                later += [event.pk for event in self.inline_events]
        if later:
            fanout_mark.dispatch(later, inserted_at=self.inserted_at)


def emit_batch() -> EmitBatch:
    """The current transaction's batch, flushed once it commits.

    A product transaction that emits many events sends at most a few broker messages, not
    one per event (dispatching dominates the cost of `emit`). The batch lives on the connection for
    as long as its flush is still registered; a rolled-back savepoint drops the flush
    (Django discards its on-commit callbacks), and the next event starts a new batch. If
    the broker is down at commit nothing is lost: the sweeper fans the events out and
    wakes their endpoints.
    """
    connection = transaction.get_connection()
    batch: EmitBatch | None = getattr(connection, "_webhooks_emit_batch", None)
    registered = batch is not None and any(
        callback == batch.flush for _, callback, _ in connection.run_on_commit
    )
    if batch is None or not registered:
        batch = EmitBatch()
        connection._webhooks_emit_batch = batch
        transaction.on_commit(batch.flush, robust=True)
    return batch
