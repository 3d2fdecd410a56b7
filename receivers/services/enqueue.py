"""Sending task messages for inbox rows. Only ids travel; the task re-reads the row."""

from collections.abc import Iterable
from uuid import UUID

from webhooks_project.celery import app as celery_app


def enqueue_processing(inbox_ids: Iterable[UUID | str], countdown: float | None = None) -> None:
    from ..tasks import process_inbox_event

    with celery_app.producer_or_acquire() as producer:
        for inbox_id in inbox_ids:
            if countdown:
                process_inbox_event.apply_async(
                    (str(inbox_id),), producer=producer, countdown=countdown
                )
            else:
                process_inbox_event.apply_async((str(inbox_id),), producer=producer)
