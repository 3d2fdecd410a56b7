"""Sending task messages. Only ids travel; every task re-reads its row."""

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from celery import current_app as celery_app
from django.db import transaction

from .. import conf

# One fan-out message carries at most this many events.
FAN_OUT_BATCH_SIZE = 100


def enqueue_deliveries(
    delivery_ids: Iterable[int], countdown: float | None = None, *, one_endpoint: bool = False
) -> None:
    """Send the deliveries' task messages: a few ids of one endpoint per message, so the
    worker claims, sends and records them as a batch (`one_endpoint` when the caller
    knows they share one and the lookup can be skipped)."""
    ids = list(dict.fromkeys(delivery_ids))
    if not ids:
        return
    groups = [ids] if one_endpoint or len(ids) == 1 else _by_endpoint(ids)
    enqueue_delivery_groups(groups, countdown)


def enqueue_delivery_groups(groups: list[list[int]], countdown: float | None = None) -> None:
    """Send task messages for deliveries already grouped by endpoint."""
    from ..tasks import deliver_batch

    size = conf.get().batch_size
    # One producer (and broker connection) for all the messages.
    with celery_app.producer_or_acquire() as producer:
        for group in groups:
            for start in range(0, len(group), size):
                batch = group[start : start + size]
                # When the message is due: the task tells from it whether it waited in a
                # backlog (and then fills its batch up).
                due = {"due": time.time() + (countdown or 0.0)}
                if countdown:
                    deliver_batch.apply_async((batch,), due, producer=producer, countdown=countdown)
                else:
                    deliver_batch.apply_async((batch,), due, producer=producer)


def _by_endpoint(ids: list[int]) -> list[list[int]]:
    from ..models import Delivery

    groups: dict[object, list[int]] = {}
    rows = Delivery.objects.filter(pk__in=ids).values_list("endpoint_id", "pk").order_by("pk")
    for endpoint_id, delivery_id in rows:
        groups.setdefault(endpoint_id, []).append(delivery_id)
    found = {delivery_id for group in groups.values() for delivery_id in group}
    # A row gone (purged, or not committed yet) still gets its message: the task decides.
    missing = [delivery_id for delivery_id in ids if delivery_id not in found]
    return [*groups.values(), *([missing] if missing else [])]


def enqueue_fan_outs(event_ids: Iterable[UUID | str]) -> None:
    from ..tasks import fan_out_events

    ids = [str(event_id) for event_id in event_ids]
    with celery_app.producer_or_acquire() as producer:
        for start in range(0, len(ids), FAN_OUT_BATCH_SIZE):
            batch = ids[start : start + FAN_OUT_BATCH_SIZE]
            fan_out_events.apply_async((batch,), {"due": time.time()}, producer=producer)


@dataclass
class EmitBatch:
    """What one product transaction emitted, sent by one flush after its commit: the
    events left to the fan-out task (one message per 100) and the deliveries created in
    the transaction itself (one message per endpoint)."""

    event_ids: list[UUID] = field(default_factory=list)
    delivery_groups: dict[UUID, list[int]] = field(default_factory=dict)
    # Events fanned out in the transaction so far, and the endpoints it read for them.
    fanned_out: int = 0
    endpoints_by_tenant: dict[str | None, list[Any] | None] = field(default_factory=dict)

    def flush(self) -> None:
        if self.delivery_groups:
            enqueue_delivery_groups(list(self.delivery_groups.values()))
        if self.event_ids:
            enqueue_fan_outs(self.event_ids)


def emit_batch() -> EmitBatch:
    """The current transaction's batch, flushed once it commits.

    A product transaction that emits many events sends a few broker messages, not one per
    event (publishing dominates the cost of `emit`). The batch lives on the connection for
    as long as its flush is still registered; a rolled-back savepoint drops the flush
    (Django discards its on-commit callbacks), and the next event starts a new batch. If
    the broker is down at commit nothing is lost: the sweeper fans the events out and
    enqueues the deliveries again.
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
