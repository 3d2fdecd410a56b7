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
* A run is bounded by ``RECEIVERS_HANDLER_TIMEOUT_SECONDS`` and its lease renewed while it
  is within it (``lease_keeper``). Past the bound the attempt has failed, as if the handler
  had raised; the late run, whenever it ends, rolls back (``LeaseLost``).
* The attempt counts when the row is claimed, so a run that never ends (its worker died)
  counts too: a row whose lease ran out with its attempts spent is ``failed`` by the
  sweeper (``inbox_fail_spent``), never claimed again.
* No handler for the type: ``ignored`` (acknowledged and counted; a manual retry after a
  handler is deployed processes it).
"""

import logging
import time
import traceback
import uuid
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from receivers import conf, metrics
from receivers.handlers import PermanentFailure, registry
from receivers.idempotency import MissingPredecessor
from receivers.models import InboxEvent, InboxStatus
from receivers.services.dispatch import dispatch_batch, dispatch_processing
from receivers.services.lease_keeper import HandlerTimedOut, hand_on_after_seconds, kept
from webhooks_core import conf as core_conf
from webhooks_core import tracing
from webhooks_core.db import jobs
from webhooks_core.retry_policy import RetryPolicy, backoff_delay

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


def spent(now: datetime) -> Q:
    """Rows whose lease ran out with their attempts spent: the last run never ended (its
    worker died, or it overran and the keeper could not record it)."""
    return Q(
        status=InboxStatus.PROCESSING,
        lease_expires_at__lt=now,
        attempts__gte=F("attempts_before_cycle") + conf.get().max_attempts,
    )


def inbox_claim(*, inbox_id: uuid.UUID | str) -> InboxClaim | None:
    now = timezone.now()
    due = jobs.claimable(
        waiting=[InboxStatus.RECEIVED, InboxStatus.RETRYING], busy=InboxStatus.PROCESSING, now=now
    )
    token, taken = jobs.lease(
        busy=InboxStatus.PROCESSING, now=now, seconds=conf.get().lease_seconds
    )
    claimed = InboxEvent.objects.filter(due & ~spent(now), pk=inbox_id).update(**taken)
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


def inbox_process_many(*, inbox_ids: list[str]) -> list[str]:
    """Process the rows of one message in turn. A row is started only within
    `HAND_ON_AFTER_SECONDS` of the first, the rest handed on in a new message: each
    handler then has its whole bound before the task's soft time limit (prefork)."""
    started = time.monotonic()
    outcomes: list[str] = []
    for index, inbox_id in enumerate(inbox_ids):
        if index and time.monotonic() - started > hand_on_after_seconds():
            dispatch_batch(inbox_ids[index:])
            break
        outcomes.append(inbox_process(inbox_id=inbox_id))
    return outcomes


def inbox_fail_spent() -> int:
    """Mark `failed` the rows whose last run never ended with their attempts spent
    (the sweeper, before it dispatches the rows whose lease ran out)."""
    now = timezone.now()
    error = (
        f"the last of its {conf.get().max_attempts} attempts never ended: its worker died, "
        "or the handler ran past RECEIVERS_HANDLER_TIMEOUT_SECONDS"
    )
    return InboxEvent.objects.filter(spent(now)).update(
        status=InboxStatus.FAILED,
        **jobs.released(),
        next_attempt_at=None,
        last_error=error,
        last_traceback="",
        updated_at=now,
    )


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
        with _bounded(claim), transaction.atomic():
            handler(event)
            if not _mark(claim, status=InboxStatus.PROCESSED, error="", tb=""):
                raise LeaseLost
    except LeaseLost:
        return _counted(event, InboxOutcome.LEASE_LOST)
    except Exception as exc:
        return _counted(event, _failure(claim, exc))
    return _counted(event, InboxOutcome.PROCESSED)


def _bounded(claim: InboxClaim) -> AbstractContextManager[None]:
    """The run's lease kept within its bound; past it, the attempt recorded as failed."""
    settings = conf.get()
    event = claim.event

    def overrun(error: HandlerTimedOut, stack: str) -> None:
        outcome = _failure(claim, error, tb=stack)
        # Lost: the run ended (or was taken over) at its bound; its end counts it.
        if outcome != InboxOutcome.LEASE_LOST:
            logger.warning(
                "inbox handler ran past its bound",
                extra={"source": event.source.slug, "event_id": event.event_id},
            )
            _counted(event, outcome)

    return kept(
        inbox_id=event.pk,
        token=claim.token,
        lease_seconds=settings.lease_seconds,
        bound_seconds=settings.handler_timeout_seconds,
        on_overrun=overrun,
    )


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


def _failure(claim: InboxClaim, exc: Exception, tb: str = "") -> str:
    settings = conf.get()
    event = claim.event
    error = f"{type(exc).__name__}: {exc}"
    tb = tb or "".join(traceback.format_exception(exc))
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
    short_wait = delay <= core_conf.scheduling().max_countdown_seconds
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
            dispatched_at=now if short_wait else None,
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
        event.dispatched_at = now
        event.processed_at = None
        event.save()
        transaction.on_commit(lambda: dispatch_processing([event.pk]), robust=True)
    return event
