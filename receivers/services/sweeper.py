"""The inbox sweeper: the database, not the broker, says which events still need work.

Redis may lose the message sent on commit, and a worker may die mid-handler. Every few
seconds (Celery beat) the sweeper dispatches rows that are due but have no message out
(``received``/``retrying``), and rows whose processing lease expired (``processing``); a row
whose lease expired with its attempts spent is ``failed`` instead (``inbox_fail_spent``). It
takes rows with ``SELECT ... FOR UPDATE SKIP LOCKED`` and marks them before sending, so two
sweepers never send the same row; a duplicate message is harmless anyway (the claim).

It also applies retention: raw bodies of finished rows are cleared after
``RECEIVERS_BODY_RETENTION_DAYS``, processed and ignored rows are deleted after
``RECEIVERS_INBOX_RETENTION_DAYS`` (longer than any provider's redelivery window, or a
late redelivery would be processed again). Failed rows stay until an operator acts.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from receivers import conf
from receivers.models import InboxEvent, InboxStatus
from receivers.services.dispatch import dispatch_processing
from receivers.services.processing import inbox_fail_spent
from webhooks_core import conf as core_conf
from webhooks_core.db.batches import run_in_batches
from webhooks_core.runtime.redispatch import redispatch_in_batches

MAX_BATCHES_PER_RUN = 20


@dataclass
class InboxSweepResult:
    due: int = 0
    leases_expired: int = 0
    attempts_spent: int = 0
    bodies_purged: int = 0
    rows_deleted: int = 0


def inbox_sweep() -> InboxSweepResult:
    settings = conf.get()
    now = timezone.now()
    grace_cutoff = now - timedelta(seconds=settings.wake_grace_seconds)
    due = Q(status__in=[InboxStatus.RECEIVED, InboxStatus.RETRYING], next_attempt_at__lte=now) & (
        Q(dispatched_at__isnull=True)
        | Q(next_attempt_at__lt=grace_cutoff, dispatched_at__lt=grace_cutoff)
    )
    expired = Q(status=InboxStatus.PROCESSING, lease_expires_at__lt=now) & (
        Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=grace_cutoff)
    )
    spent = inbox_fail_spent()
    result = InboxSweepResult(
        due=_redispatch(due), leases_expired=_redispatch(expired), attempts_spent=spent
    )
    result.bodies_purged, result.rows_deleted = inbox_apply_retention()
    return result


def _redispatch(condition: Q) -> int:
    return redispatch_in_batches(
        InboxEvent.objects.all(),
        condition,
        order_by="received_at",
        dispatch=dispatch_processing,
        batch_size=core_conf.scheduling().sweep_batch_size,
        max_batches=MAX_BATCHES_PER_RUN,
    )


def inbox_apply_retention() -> tuple[int, int]:
    settings = conf.get()
    now = timezone.now()
    finished = [InboxStatus.PROCESSED, InboxStatus.IGNORED, InboxStatus.FAILED]
    body_cutoff = now - timedelta(days=settings.body_retention_days)
    row_cutoff = now - timedelta(days=settings.inbox_retention_days)
    # In small batches (short transactions, short locks): see webhooks_core.db.batches.
    purged = run_in_batches(
        lambda: InboxEvent.objects.filter(
            status__in=finished, received_at__lt=body_cutoff, raw_body__isnull=False
        ).order_by("received_at"),
        lambda pks: InboxEvent.objects.filter(pk__in=pks).update(raw_body=None),
        batch_size=core_conf.scheduling().sweep_batch_size,
    )
    deleted = run_in_batches(
        lambda: InboxEvent.objects.filter(
            status__in=[InboxStatus.PROCESSED, InboxStatus.IGNORED], received_at__lt=row_cutoff
        ).order_by("received_at"),
        lambda pks: InboxEvent.objects.filter(pk__in=pks).delete()[0],
        batch_size=core_conf.scheduling().sweep_batch_size,
    )
    return purged.rows, deleted.rows
