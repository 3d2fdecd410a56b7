"""Celery tasks of the receiving side: thin wrappers that take ids and call services."""

from dataclasses import asdict

from celery import shared_task

from . import services


@shared_task(name="receivers.tasks.process_inbox_event")
def process_inbox_event(inbox_id: str) -> str:
    return services.inbox_process(inbox_id=inbox_id)


@shared_task(name="receivers.tasks.process_inbox_events")
def process_inbox_events(inbox_ids: list[str]) -> list[str]:
    # One message for the rows one web process accepted together; each row is claimed on
    # its own, so a redelivered message skips the rows already done.
    return [services.inbox_process(inbox_id=inbox_id) for inbox_id in inbox_ids]


@shared_task(name="receivers.tasks.sweep")
def sweep() -> dict[str, int]:
    return asdict(services.inbox_sweep())


@shared_task(name="receivers.tasks.reconcile_all")
def reconcile_all() -> int:
    from .reconciliation import enqueue_reconciliations

    return enqueue_reconciliations()


@shared_task(name="receivers.tasks.reconcile_source")
def reconcile_source(source_id: int) -> dict[str, int]:
    from .reconciliation import source_reconcile

    return asdict(source_reconcile(source_id=source_id))
