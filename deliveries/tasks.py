"""Celery tasks of the sending side: thin wrappers that take ids and call services."""

import time
from dataclasses import asdict

from celery import shared_task

from . import services
from .services.enqueue import enqueue_delivery_groups

# A message that started this much after it was due waited in a backlog.
LATE_SECONDS = 0.05


def _late(due: float | None) -> bool:
    return due is not None and time.time() - due > LATE_SECONDS


@shared_task(name="deliveries.tasks.fan_out_event")
def fan_out_event(event_id: str) -> int:
    return services.event_fan_out(event_id=event_id)


@shared_task(name="deliveries.tasks.fan_out_events")
def fan_out_events(event_ids: list[str], due: float | None = None) -> int:
    return services.events_fan_out(event_ids=event_ids, top_up=_late(due))


@shared_task(name="deliveries.tasks.deliver_batch")
def deliver_batch(delivery_ids: list[int], due: float | None = None) -> dict[str, str]:
    wait = services.deliveries_busy_wait(delivery_ids=delivery_ids) if delivery_ids else 0.0
    if wait:
        # The same message, later; the rows are untouched (still pending, still enqueued).
        enqueue_delivery_groups([delivery_ids], countdown=wait)
        return {}
    outcomes = services.deliveries_attempt(delivery_ids=delivery_ids, top_up=_late(due))
    return {str(delivery_id): outcome for delivery_id, outcome in outcomes.items()}


@shared_task(name="deliveries.tasks.deliver")
def deliver(delivery_id: int) -> str:
    """Messages of one delivery, as versions before batching sent them."""
    return services.delivery_attempt(delivery_id=delivery_id)


@shared_task(name="deliveries.tasks.sweep")
def sweep() -> dict[str, int]:
    return asdict(services.sweep())


@shared_task(name="deliveries.tasks.run_replay")
def run_replay(replay_id: int) -> bool:
    return services.replay_step(replay_id=replay_id)


@shared_task(name="deliveries.tasks.resume_stalled_replays")
def resume_stalled_replays() -> int:
    return services.replays_resume_stalled()


@shared_task(name="deliveries.tasks.purge")
def purge() -> dict[str, int]:
    return {
        **asdict(services.purge_expired()),
        "portal_links_deleted": services.portal_links_purge(),
    }
