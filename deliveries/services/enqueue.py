"""Sending task messages. Only ids travel; every task re-reads its row."""

from collections.abc import Iterable
from uuid import UUID

from webhooks_project.celery import app as celery_app


def enqueue_deliveries(delivery_ids: Iterable[int], countdown: float | None = None) -> None:
    from ..tasks import deliver

    # One producer (and broker connection) for the whole batch.
    with celery_app.producer_or_acquire() as producer:
        for delivery_id in delivery_ids:
            if countdown:
                deliver.apply_async((delivery_id,), producer=producer, countdown=countdown)
            else:
                deliver.apply_async((delivery_id,), producer=producer)


def enqueue_fan_outs(event_ids: Iterable[UUID | str]) -> None:
    from ..tasks import fan_out_event

    with celery_app.producer_or_acquire() as producer:
        for event_id in event_ids:
            fan_out_event.apply_async((str(event_id),), producer=producer)
