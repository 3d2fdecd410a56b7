"""Dispatch: sending task messages. Only ids travel; every task re-reads its rows.

A delivery's message says only "endpoint E has work" (`deliveries.tasks.work_endpoint`)
and names no rows: the endpoint's owner claims whatever is due when it runs. At most one
such message is out per endpoint (see `health.wakes`), so the messages of a busy
endpoint do not grow with its events. Messages are dispatched by the tasks' registered
names: no service imports the tasks module.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import redis
from celery import current_app as celery_app
from django.db import transaction

from deliveries import conf, metrics
from deliveries.pipeline.wake_marks import WakeBook, get_book
from webhooks_core.runtime.tasking import QUEUE_DELIVERY, QUEUE_FANOUT, QUEUE_MAINTENANCE

logger = logging.getLogger(__name__)

WORK_ENDPOINT_TASK = "deliveries.tasks.work_endpoint"
FAN_OUT_EVENTS_TASK = "deliveries.tasks.fan_out_events"
RUN_REPLAY_TASK = "deliveries.tasks.run_replay"
VALIDATE_ENDPOINT_TASK = "deliveries.tasks.validate_endpoint"
RUN_ERASURE_TASK = "deliveries.erasure.run"
TASK_QUEUES = {
    WORK_ENDPOINT_TASK: QUEUE_DELIVERY,
    FAN_OUT_EVENTS_TASK: QUEUE_FANOUT,
    RUN_REPLAY_TASK: QUEUE_MAINTENANCE,
    VALIDATE_ENDPOINT_TASK: QUEUE_MAINTENANCE,
    RUN_ERASURE_TASK: QUEUE_MAINTENANCE,
}
# One fan-out message carries at most this many events.
FAN_OUT_BATCH_SIZE = 100
# A wake's mark outlives its due time by this much: long enough for a queued message to be
# consumed, short enough that a lost one is forgotten soon.
MARK_SECONDS = 60.0


def wake_book() -> WakeBook:
    return get_book(conf.health().redis_url)


def dispatch_wakes(
    endpoint_ids: Iterable[UUID | str], countdown: float = 0.0, *, stale_after: float = -1.0
) -> int:
    """Tell each endpoint's owner-to-be that it has work (due now, or in `countdown`
    seconds); returns how many messages were dispatched. A wake folded into one already
    out, or into a working owner's next look, dispatches nothing. With `stale_after`, a
    mark older than that many seconds past its due time is taken as a lost message (the
    sweeper's case)."""
    book = wake_book()
    dispatched: list[str] = []
    for endpoint_id in dict.fromkeys(str(e) for e in endpoint_ids):
        try:
            fresh = book.mark(endpoint_id, countdown, MARK_SECONDS, stale_after)
        except redis.RedisError:
            fresh = True  # the marks only save messages; the database keeps the truth
        metrics.wakes_total.labels(result="published" if fresh else "deduplicated").inc()
        if fresh:
            dispatched.append(endpoint_id)
    if dispatched:
        options: dict[str, Any] = {"queue": QUEUE_DELIVERY}
        if countdown > 0:
            options["countdown"] = countdown
        # One producer (and broker connection) for all the messages.
        with celery_app.producer_or_acquire() as producer:
            for endpoint_id in dispatched:
                celery_app.send_task(
                    WORK_ENDPOINT_TASK, (endpoint_id,), producer=producer, **options
                )
    return len(dispatched)


def dispatch_task(name: str, *args: Any) -> None:
    """One message of a task by its registered name (its queue comes from its routes)."""
    celery_app.send_task(name, args, queue=TASK_QUEUES[name])


def dispatch_fan_outs(event_ids: Iterable[UUID | str]) -> None:
    ids = [str(event_id) for event_id in event_ids]
    with celery_app.producer_or_acquire() as producer:
        for start in range(0, len(ids), FAN_OUT_BATCH_SIZE):
            batch = ids[start : start + FAN_OUT_BATCH_SIZE]
            celery_app.send_task(
                FAN_OUT_EVENTS_TASK, (batch,), producer=producer, queue=QUEUE_FANOUT
            )


@dataclass
class EmitBatch:
    """What one product transaction emitted, seen to by one flush after its commit: the
    events fanned out right there, in this process (few endpoints), and the others left
    to the fan-out task (one message per 100)."""

    # The events themselves (as inserted: the fan-out needs no read of them), and the
    # ids of the others.
    inline_events: list[Any] = field(default_factory=list)
    event_ids: list[UUID] = field(default_factory=list)
    fan_out_inline: Any = None  # the fan-out's entry point, set by whoever fills the batch

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
            dispatch_fan_outs(later)


def emit_batch() -> EmitBatch:
    """The current transaction's batch, flushed once it commits.

    A product transaction that emits many events sends a few broker messages, not one per
    event (dispatching dominates the cost of `emit`). The batch lives on the connection for
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
