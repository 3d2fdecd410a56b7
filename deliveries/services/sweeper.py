"""The sweeper: the database, not the broker, decides what still has to happen.

Redis may lose every message and a worker may die mid-request. Every few seconds (Celery
beat) the sweeper finds events that were never fanned out, deliveries that are due but have
no task message out, and deliveries whose lease expired, and enqueues them again. Rows are
taken in batches with ``SELECT ... FOR UPDATE SKIP LOCKED`` so that two sweepers never
take the same row, and each batch is marked before its messages are sent.
"""

import time
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from webhooks_core.requeue import requeue_in_batches

from .. import conf
from ..models import Delivery, DeliveryStatus, Event
from .dispatch import enqueue_deliveries, enqueue_fan_outs

MAX_BATCHES_PER_RUN = 20
MAX_SECONDS_PER_RUN = 10.0


@dataclass
class SweepResult:
    events_fanned_out: int = 0
    deliveries_due: int = 0
    leases_expired: int = 0


def sweep() -> SweepResult:
    result = SweepResult()
    result.events_fanned_out = _requeue_unfanned_events()
    deadline = time.monotonic() + MAX_SECONDS_PER_RUN
    now = timezone.now()
    grace_cutoff = now - timedelta(seconds=conf.get().requeue_grace_seconds)
    # No message out, or the one sent has had ample time to be consumed.
    not_in_flight = Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=grace_cutoff)
    due = Q(status=DeliveryStatus.PENDING, next_attempt_at__lte=now) & (
        Q(enqueued_at__isnull=True)
        | Q(next_attempt_at__lt=grace_cutoff, enqueued_at__lt=grace_cutoff)
    )
    expired = Q(status=DeliveryStatus.SENDING, lease_expires_at__lt=now) & not_in_flight
    result.deliveries_due = _requeue_deliveries(due, deadline)
    result.leases_expired = _requeue_deliveries(expired, deadline)
    return result


def _requeue_unfanned_events() -> int:
    settings = conf.get()
    cutoff = timezone.now() - timedelta(seconds=settings.fanout_grace_seconds)
    event_ids = list(
        Event.objects.filter(fanned_out_at__isnull=True, created_at__lt=cutoff)
        .order_by("created_at")
        .values_list("id", flat=True)[: settings.sweep_batch_size]
    )
    if event_ids:
        enqueue_fan_outs(event_ids)
    return len(event_ids)


def _requeue_deliveries(condition: Q, deadline: float) -> int:
    return requeue_in_batches(
        Delivery.objects.all(),
        condition,
        order_by="next_attempt_at",
        enqueue=enqueue_deliveries,
        batch_size=conf.get().sweep_batch_size,
        max_batches=MAX_BATCHES_PER_RUN,
        deadline=deadline,
    )
