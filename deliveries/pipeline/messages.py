"""Task messages: only ids travel, and every task re-reads its rows. Messages go by the
tasks' registered names, so no service imports the tasks module."""

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from celery import current_app as celery_app

from webhooks_core.runtime.tasking import QUEUE_DELIVERY, QUEUE_FANOUT, QUEUE_MAINTENANCE

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
