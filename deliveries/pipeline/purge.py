"""Retention of the sending side, applied by beat (``deliveries.tasks.purge``) in batches.

* Attempts older than ``WEBHOOKS_ATTEMPT_RETENTION_DAYS`` are deleted (the delivery keeps
  its status, counters and last error).
* Events older than ``WEBHOOKS_EVENT_RETENTION_DAYS`` are deleted with their deliveries and
  remaining attempts, but only once every delivery is final (succeeded, dead-lettered,
  cancelled): an event still pending, sending or held for a suspended endpoint stays
  until it is delivered or given up. After that it can no longer be replayed. Payloads
  offloaded to storage are deleted with their events.
* A tenant with its own ``retention_days`` (``PUT /api/v1/tenants/{tenant}/settings``,
  never more than the global settings) has its events and attempts purged the same way
  once they are older than that.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from deliveries import conf
from deliveries.models import Attempt, Delivery, DeliveryStatus, Event, TenantSettings
from deliveries.pipeline import payloads
from webhooks_core.db.batches import run_in_batches

UNFINISHED = (DeliveryStatus.PENDING, DeliveryStatus.SENDING, DeliveryStatus.HELD)


@dataclass
class PurgeResult:
    attempts_deleted: int = 0
    attempt_batches: int = 0
    events_deleted: int = 0
    event_batches: int = 0


def purge_expired(*, batch_size: int | None = None) -> PurgeResult:
    settings = conf.get()
    size = batch_size or settings.purge_batch_size
    now = timezone.now()
    result = PurgeResult()
    _purge(
        result,
        size,
        attempt_cutoff=now - timedelta(days=settings.attempt_retention_days),
        event_cutoff=now - timedelta(days=settings.event_retention_days),
    )
    shorter = TenantSettings.objects.filter(
        retention_days__lt=max(settings.attempt_retention_days, settings.event_retention_days)
    ).values_list("tenant", "retention_days")
    for tenant, own in shorter:
        days = int(own or 0)
        _purge(
            result,
            size,
            attempt_cutoff=now - timedelta(days=min(days, settings.attempt_retention_days)),
            event_cutoff=now - timedelta(days=min(days, settings.event_retention_days)),
            attempts_of=Q(delivery__endpoint__tenant=tenant),
            events_of=Q(tenant=tenant),
        )
    return result


def _purge(
    result: PurgeResult,
    size: int,
    *,
    attempt_cutoff: Any,
    event_cutoff: Any,
    attempts_of: Q | None = None,
    events_of: Q | None = None,
) -> None:
    """Attempts and events older than the cutoffs (of one tenant with ``*_of``)."""

    def old_attempts() -> QuerySet[Attempt]:
        # Walking the primary key finds the oldest rows first without a started_at index.
        rows = Attempt.objects.filter(started_at__lt=attempt_cutoff)
        return (rows.filter(attempts_of) if attempts_of is not None else rows).order_by("pk")

    def delete_attempts(pks: Sequence[Any]) -> int:
        return Attempt.objects.filter(pk__in=pks).delete()[0]

    attempts = run_in_batches(old_attempts, delete_attempts, batch_size=size)

    def old_events() -> QuerySet[Event]:
        unfinished = Delivery.objects.filter(event=OuterRef("pk"), status__in=UNFINISHED)
        rows = Event.objects.filter(created_at__lt=event_cutoff, fanned_out_at__isnull=False)
        if events_of is not None:
            rows = rows.filter(events_of)
        return rows.exclude(Exists(unfinished)).order_by("created_at")

    def delete_events(pks: Sequence[Any]) -> int:
        # Children first, each one statement, so no row is loaded into Python.
        Attempt.objects.filter(delivery__event_id__in=pks).delete()
        Delivery.objects.filter(event_id__in=pks).delete()
        stored = list(
            Event.objects.filter(pk__in=pks).exclude(data_ref="").values_list("data_ref", flat=True)
        )
        deleted = Event.objects.filter(pk__in=pks).delete()[1].get(Event._meta.label, 0)
        # Offloaded payloads go once their rows are gone for good, never before.
        transaction.on_commit(lambda: payloads.discard(stored), robust=True)
        return deleted

    events = run_in_batches(old_events, delete_events, batch_size=size)
    result.attempts_deleted += attempts.rows
    result.attempt_batches += attempts.batches
    result.events_deleted += events.rows
    result.event_batches += events.batches
