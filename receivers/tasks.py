"""Celery tasks of the receiving side: thin wrappers that take ids and call services."""

from dataclasses import asdict
from typing import Any

from receivers import conf, services
from receivers.reconciliation import dispatch_reconciliations, source_reconcile
from receivers.services.lease_keeper import task_time_limits
from webhooks_core.conf import value as core_value
from webhooks_core.runtime.tasking import (
    QUEUE_INBOX,
    QUEUE_MAINTENANCE,
    every,
    periodic,
    webhook_task,
)

# Derived from the handlers' bound, whatever the host's task-wide limits say; applied by
# the prefork pool (elsewhere the lease keeper ends an overrunning attempt on its own).
SOFT_TIME_LIMIT, TIME_LIMIT = task_time_limits(conf.get().handler_timeout_seconds)


@webhook_task(
    "receivers.tasks.process_inbox_event",
    queue=QUEUE_INBOX,
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
)
def process_inbox_event(inbox_id: str) -> str:
    return services.inbox_process(inbox_id=inbox_id)


@webhook_task(
    "receivers.tasks.process_inbox_events",
    queue=QUEUE_INBOX,
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
)
def process_inbox_events(inbox_ids: list[str]) -> list[str]:
    # One message for the rows one web process accepted together; each row is claimed on
    # its own, so a redelivered message skips the rows already done.
    return services.inbox_process_many(inbox_ids=inbox_ids)


@webhook_task("receivers.tasks.sweep", queue=QUEUE_MAINTENANCE)
def sweep() -> dict[str, int]:
    return asdict(services.inbox_sweep())


@webhook_task("receivers.tasks.reconcile_all", queue=QUEUE_MAINTENANCE)
def reconcile_all() -> int:
    return dispatch_reconciliations()


@webhook_task("receivers.tasks.reconcile_source", queue=QUEUE_MAINTENANCE)
def reconcile_source(source_id: int) -> dict[str, int]:
    return asdict(source_reconcile(source_id=source_id))


@periodic
def beat_entries() -> dict[str, dict[str, Any]]:
    return {
        "receivers-sweep": every(
            "receivers.tasks.sweep", core_value("WEBHOOKS_SWEEP_INTERVAL_SECONDS")
        ),
        "receivers-reconcile": every(
            "receivers.tasks.reconcile_all", conf.get().reconcile_interval_seconds
        ),
    }
