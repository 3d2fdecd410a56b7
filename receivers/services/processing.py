"""Processing an inbox row: claim it, run its handler, record the outcome.

* The claim is one conditional UPDATE (due ``received``/``retrying``, or ``processing`` with
  an expired lease -> ``processing`` with a fresh lease token), so of two task messages for
  one row only one runs the handler at a time.
* The handler runs in a transaction that also marks the row processed, guarded by the
  lease token: its database effects and the status commit together, and a worker whose
  lease was taken over rolls its effects back instead of committing them twice.
* A failure is retried with exponential backoff and jitter (``webhooks_core.retry_policy``):
  short waits as a Celery countdown, long ones left to the sweeper through
  ``next_attempt_at``. After ``RECEIVERS_MAX_ATTEMPTS`` attempts in the current cycle, or
  on ``PermanentFailure``, the row is ``failed``: terminal until someone retries it.
* No handler for the type: ``ignored`` (acknowledged and counted; a manual retry after a
  handler is deployed processes it).
"""

import logging
import traceback
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from webhooks_core import jobs, tracing
from webhooks_core.retry_policy import RetryPolicy, backoff_delay

from .. import conf, metrics
from ..handlers import PermanentFailure, registry
from ..idempotency import MissingPredecessor
from ..models import InboxEvent, InboxStatus
from .dispatch import dispatch_processing

logger = logging.getLogger(__name__)

ERROR_LIMIT = 2000
TRACEBACK_LIMIT = 20000


class InboxOutcome:
    """What `inbox_process` did; tests and logs assert on these strings."""

    NOT_CLAIMED = "not_claimed"
    PROCESSED = "processed"
    IGNORED = "ignored"
    RETRY_SCHEDULED = "retry_scheduled"
    FAILED = "failed"
    LEASE_LOST = "lease_lost"


class LeaseLost(Exception):
    """Another worker took the row over while this one ran its handler."""


@dataclass(frozen=True)
class InboxClaim:
    """An inbox row taken by `inbox_claim`, under the lease token only its claimant holds."""

    event: InboxEvent
    token: uuid.UUID
    now: datetime


def inbox_claim(*, inbox_id: uuid.UUID | str) -> InboxClaim | None:
    now = timezone.now()
    due = jobs.claimable(
        waiting=[InboxStatus.RECEIVED, InboxStatus.RETRYING], busy=InboxStatus.PROCESSING, now=now
    )
    token, taken = jobs.lease(
        busy=InboxStatus.PROCESSING, now=now, seconds=conf.get().lease_seconds
    )
    claimed = InboxEvent.objects.filter(due, pk=inbox_id).update(**taken)
    if not claimed:
        return None
    # None if the row went in between: its source was deleted with force (source_delete).
    event = InboxEvent.objects.select_related("source").filter(pk=inbox_id).first()
    return None if event is None else InboxClaim(event=event, token=token, now=now)


def inbox_process(*, inbox_id: uuid.UUID | str) -> str:
    """Process one inbox row if it can be claimed. Returns an `InboxOutcome` string."""
    claim = inbox_claim(inbox_id=inbox_id)
    if claim is None:
        return InboxOutcome.NOT_CLAIMED
    event = claim.event
    with tracing.span(
        "webhooks process",
        kind="CONSUMER",
        traceparent=_traceparent_of(event),
        attributes={
            "webhooks.source": event.source.slug,
            "webhooks.event.id": event.event_id,
            "webhooks.event.type": event.type,
            "webhooks.attempt": event.attempts,
        },
    ) as span:
        outcome = _process(claim)
        tracing.set_attributes(span, {"webhooks.outcome": str(outcome)})
        if outcome in (InboxOutcome.FAILED, InboxOutcome.RETRY_SCHEDULED):
            tracing.mark_error(span, str(outcome))
        return outcome


def _traceparent_of(event: InboxEvent) -> str | None:
    """The sender's traceparent, as stored with the request's headers."""
    headers = event.headers if isinstance(event.headers, dict) else {}
    value = next((v for k, v in headers.items() if str(k).lower() == "traceparent"), None)
    return tracing.from_header(value if isinstance(value, str) else None)


def _process(claim: InboxClaim) -> str:
    event = claim.event
    handler = registry.resolve(event.source.slug, event.type)
    if handler is None:
        outcome = _finish(claim, InboxStatus.IGNORED, error=f"no handler for {event.type!r}")
        return _counted(event, outcome)
    try:
        with transaction.atomic():
            handler(event)
            if not _mark(claim, status=InboxStatus.PROCESSED, error="", tb=""):
                raise LeaseLost
    except LeaseLost:
        return _counted(event, InboxOutcome.LEASE_LOST)
    except Exception as exc:
        return _counted(event, _failure(claim, exc))
    return _counted(event, InboxOutcome.PROCESSED)


def _counted(event: InboxEvent, outcome: str) -> str:
    metrics.count_processing(event.source.slug, outcome)
    if outcome == InboxOutcome.PROCESSED:
        metrics.observe_processing_latency(event.source.slug, event.received_at)
    logger.info(
        "inbox event %s",
        outcome,
        extra={
            "source": event.source.slug,
            "event_id": event.event_id,
            "event_type": event.type,
            "attempt": event.attempts,
        },
    )
    return outcome


def _mark(claim: InboxClaim, *, status: str, error: str, tb: str, **fields: object) -> bool:
    now = timezone.now()
    done = status in (InboxStatus.PROCESSED, InboxStatus.IGNORED, InboxStatus.FAILED)
    values: dict[str, object] = {
        "status": status,
        **jobs.released(),
        "last_error": error[:ERROR_LIMIT],
        "last_traceback": tb[-TRACEBACK_LIMIT:],
        "updated_at": now,
    }
    if done:
        values.update(next_attempt_at=None, processed_at=now if status != "failed" else None)
    values.update(fields)
    return (
        InboxEvent.objects.filter(pk=claim.event.pk, lease_token=claim.token).update(**values) == 1
    )


def _finish(claim: InboxClaim, status: str, *, error: str) -> str:
    if not _mark(claim, status=status, error=error, tb=""):
        return InboxOutcome.LEASE_LOST
    return InboxOutcome.IGNORED if status == InboxStatus.IGNORED else InboxOutcome.PROCESSED


def _failure(claim: InboxClaim, exc: Exception) -> str:
    settings = conf.get()
    event = claim.event
    error = f"{type(exc).__name__}: {exc}"
    tb = "".join(traceback.format_exception(exc))
    attempt_in_cycle = event.attempts - event.attempts_before_cycle
    if isinstance(exc, PermanentFailure) or attempt_in_cycle >= settings.max_attempts:
        if not _mark(claim, status=InboxStatus.FAILED, error=error, tb=tb):
            return InboxOutcome.LEASE_LOST
        logger.error(
            "inbox event failed for good",
            extra={"source": event.source.slug, "event_id": event.event_id, "error": error},
        )
        return InboxOutcome.FAILED
    policy = RetryPolicy(
        base_backoff_seconds=settings.backoff_base_seconds,
        max_backoff_seconds=settings.backoff_max_seconds,
    )
    delay = backoff_delay(attempt_in_cycle, policy)
    short_wait = delay <= settings.max_countdown_seconds
    now = timezone.now()
    if isinstance(exc, MissingPredecessor):
        error = f"waiting for a predecessor: {exc}"
    with transaction.atomic():
        marked = _mark(
            claim,
            status=InboxStatus.RETRYING,
            error=error,
            tb=tb,
            next_attempt_at=now + timedelta(seconds=delay),
            # Long waits have no message out: the sweeper dispatches them when due.
            enqueued_at=now if short_wait else None,
        )
        if marked and short_wait:
            transaction.on_commit(
                lambda: dispatch_processing([event.pk], countdown=delay), robust=True
            )
    return InboxOutcome.RETRY_SCHEDULED if marked else InboxOutcome.LEASE_LOST


class InboxNotRetryable(Exception):
    """The row is being processed right now; a manual retry would change nothing."""


def inbox_retry(*, inbox_id: uuid.UUID | str) -> InboxEvent:
    """Process a row again now, with a fresh retry cycle (admin action, API, operator).

    This is how a failed (or ignored, once a handler exists) event is processed again: the
    dedupe on arrival is about deliveries from the provider and never blocks it.
    """
    now = timezone.now()
    with transaction.atomic():
        event = InboxEvent.objects.select_for_update().get(pk=inbox_id)
        if event.status == InboxStatus.PROCESSING:
            raise InboxNotRetryable("the event is being processed")
        event.status = InboxStatus.RECEIVED
        event.attempts_before_cycle = event.attempts
        event.next_attempt_at = now
        event.enqueued_at = now
        event.processed_at = None
        event.save()
        transaction.on_commit(lambda: dispatch_processing([event.pk]), robust=True)
    return event
