"""Writing back a batch's outcomes: its attempts, each delivery's new state and the
endpoint's health, in one transaction, then the messages, signals, metrics and logs."""

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from .. import conf, observability
from ..models import Attempt, Delivery, DeliveryStatus, Endpoint
from ..retry_policy import Decision, Verdict
from .admission import endpoint_busy_wait
from .breaker import endpoint_record_attempts
from .dispatch import enqueue_deliveries
from .finished import on_delivery_outcome
from .suspension import endpoint_suspend_automatically

# The retry window runs from the first request actually made in the current cycle (a
# manual retry starts a new one), not from a claim that found the endpoint suspended. The
# batch's attempts are inserted before the deliveries are updated, so this finds them.
_FIRST_ATTEMPT_OF_CYCLE = Coalesce(
    "first_attempt_at",
    Subquery(
        Attempt.objects.filter(
            delivery_id=OuterRef("pk"), number__gt=OuterRef("attempts_before_cycle")
        )
        .order_by("number")
        .values("started_at")[:1]
    ),
)


# An endpoint's `last_success_at` is kept to this precision: a busy endpoint's row is not
# rewritten by every batch.
LAST_SUCCESS_RESOLUTION_SECONDS = 1.0
# A batch recorded with more of its lease left than this skips re-reading which of its
# rows it still owns (the updates check the lease token anyway).
LEASE_MARGIN_SECONDS = 5.0


def _first_attempt_of_cycle(results: list["Result"]) -> Coalesce:
    if len(results) == 1 and results[0].attempt is not None:
        # One row: its own attempt's start, without the subquery.
        return Coalesce("first_attempt_at", Value(results[0].attempt.started_at))
    return _FIRST_ATTEMPT_OF_CYCLE


class Outcome:
    """What an attempt did; tests and logs assert on these strings."""

    NOT_CLAIMED = "not_claimed"
    HELD = "held"
    SUCCEEDED = "succeeded"
    RETRY_SCHEDULED = "retry_scheduled"
    DEAD_LETTERED = "dead_lettered"
    LEASE_LOST = "lease_lost"
    # Deferred without spending an attempt: breaker open, in-flight or rate limit reached.
    DEFERRED = "deferred"


@dataclass(frozen=True)
class Claim:
    """Deliveries taken by one claim, ordered by endpoint, all under one lease token."""

    deliveries: list[Delivery]
    token: uuid.UUID
    now: datetime
    lease_expires_at: datetime


@dataclass(frozen=True)
class Result:
    """A delivery's decided outcome; `attempt` is None when no request was made."""

    delivery: Delivery
    decision: Decision
    status_code: int | None = None
    error: str = ""
    attempt: Attempt | None = None
    # The attempt failed on our side (an exception while preparing or sending it): it is
    # recorded and retried, but says nothing about the endpoint's health.
    local_failure: bool = False


def release_claim(
    claim: Claim, deliveries: list[Delivery], *, status: str, **fields: object
) -> int:
    """Release claimed deliveries unsent, returning the attempt the claim counted (and
    setting `fields`); returns how many were still this claim's."""
    return Delivery.objects.filter(
        pk__in=[d.pk for d in deliveries], lease_token=claim.token
    ).update(
        status=status,
        lease_token=None,
        lease_expires_at=None,
        attempts=F("attempts") - 1,
        updated_at=timezone.now(),
        **fields,
    )


@dataclass(frozen=True)
class Deferral:
    """Claimed deliveries not sent now and released without spending an attempt, due
    again after `seconds`. Those deferred `to_sweeper` (behind an open circuit or a probe)
    wait in the database with no task message; those `due_now` (no free in-flight slot)
    stay due for the batch holding the slots, their message coming after `seconds`."""

    deliveries: list[Delivery]
    seconds: float = 0.0
    to_sweeper: bool = False
    due_now: bool = False


def record(
    claim: Claim, endpoint: Endpoint, results: list[Result], deferral: Deferral
) -> dict[int, str]:
    """Record one endpoint's results and defer the deliveries that were not sent.

    Returns each delivery's outcome (`LEASE_LOST` where another worker took it over).
    """
    now = timezone.now()
    settings = conf.get()
    outcomes: dict[int, str] = {}
    retries: list[tuple[int, float]] = []
    with transaction.atomic():
        ids = [result.delivery.pk for result in results]
        owned = set(ids)
        lease_left = (claim.lease_expires_at - now).total_seconds()
        if ids and lease_left < LEASE_MARGIN_SECONDS:
            # Another worker may have taken some over: write only the rows still ours.
            owned = set(
                Delivery.objects.select_for_update()
                .filter(pk__in=ids, lease_token=claim.token)
                .values_list("pk", flat=True)
            )
        attempts = [result.attempt for result in results if result.attempt is not None]
        if attempts:
            Attempt.objects.bulk_create(attempts)
        succeeded: dict[int | None, list[Result]] = defaultdict(list)
        for result in results:
            delivery = result.delivery
            if delivery.pk not in owned:
                outcomes[delivery.pk] = Outcome.LEASE_LOST
                continue
            if result.decision.verdict == Verdict.SUCCEEDED:
                # The common case: one statement for all of them (per status code).
                outcome, countdown = Outcome.SUCCEEDED, None
                succeeded[result.status_code].append(result)
            else:
                outcome, countdown = _record_failure(claim, result, now, settings)
            outcomes[delivery.pk] = outcome
            if countdown is not None:
                retries.append((delivery.pk, countdown))
            on_delivery_outcome(delivery, outcome)
        for status_code, done in succeeded.items():
            Delivery.objects.filter(
                pk__in=[r.delivery.pk for r in done], lease_token=claim.token
            ).update(
                status=DeliveryStatus.SUCCEEDED,
                lease_token=None,
                lease_expires_at=None,
                last_status_code=status_code,
                last_error="",
                updated_at=now,
                completed_at=now,
                next_attempt_at=None,
                first_attempt_at=_first_attempt_of_cycle(done),
            )
        if attempts:
            _record_endpoint_health(
                endpoint, [r for r in results if r.attempt is not None and not r.local_failure]
            )
        gone = next((r for r in results if r.decision.suspend_endpoint), None)
        if gone is not None and gone.delivery.pk in owned:
            endpoint_suspend_automatically(
                endpoint_id=endpoint.pk,
                reason=f"receiver answered {gone.status_code} (Gone)",
            )
        if deferral.deliveries:
            _defer(claim, deferral)
            outcomes.update((delivery.pk, Outcome.DEFERRED) for delivery in deferral.deliveries)
        if retries:
            transaction.on_commit(lambda: _enqueue_retries(retries), robust=True)
    for result in results:
        observability.attempt_recorded(
            delivery=result.delivery,
            attempt=result.attempt,
            outcome=outcomes[result.delivery.pk],
            status_code=result.status_code,
            error=result.error,
        )
    return outcomes


def _record_failure(
    claim: Claim, result: Result, now: datetime, settings: conf.DeliverySettings
) -> tuple[str, float | None]:
    """Record a retry or a dead letter; returns the outcome and, for a retry soon enough
    to wait in the broker, its countdown."""
    decision = result.decision
    reason = f" ({decision.reason})" if decision.reason else ""
    fields: dict[str, object] = {
        "lease_token": None,
        "lease_expires_at": None,
        "last_status_code": result.status_code,
        "last_error": f"{result.error}{reason}"[:2000],
        "updated_at": now,
    }
    if result.attempt is not None:
        fields["first_attempt_at"] = _first_attempt_of_cycle([result])
    countdown: float | None = None
    if decision.verdict == Verdict.RETRY:
        short_wait = decision.delay_seconds <= settings.max_countdown_seconds
        countdown = decision.delay_seconds if short_wait else None
        fields.update(
            status=DeliveryStatus.PENDING,
            next_attempt_at=now + timedelta(seconds=decision.delay_seconds),
            # Long waits have no message out: the sweeper enqueues them when due.
            enqueued_at=now if short_wait else None,
        )
        outcome = Outcome.RETRY_SCHEDULED
    else:
        fields.update(status=DeliveryStatus.DEAD_LETTERED, completed_at=now, next_attempt_at=None)
        outcome = Outcome.DEAD_LETTERED
    Delivery.objects.filter(pk=result.delivery.pk, lease_token=claim.token).update(**fields)
    return outcome, countdown


def _record_endpoint_health(endpoint: Endpoint, sent: list[Result]) -> None:
    """Count the endpoint's consecutive failures (those after its last success) and move
    its breaker; `sent` are the results with a request, in the order they were made."""
    now = timezone.now()
    succeeded = [r.decision.verdict == Verdict.SUCCEEDED for r in sent]
    failures = succeeded.count(False)
    recently = endpoint.last_success_at is not None and (
        now - endpoint.last_success_at
    ) < timedelta(seconds=LAST_SUCCESS_RESOLUTION_SECONDS)
    if not failures and not endpoint.consecutive_failures and recently:
        pass  # nothing worth a write to a row that every batch of the endpoint touches
    elif True in succeeded:
        trailing = succeeded[::-1].index(True)
        Endpoint.objects.filter(pk=endpoint.pk).update(
            consecutive_failures=trailing,
            last_success_at=now,
            failing_since=now if trailing else None,
            **({"last_failure_at": now} if trailing else {}),
        )
    else:
        Endpoint.objects.filter(pk=endpoint.pk).update(
            consecutive_failures=F("consecutive_failures") + failures,
            last_failure_at=now,
            failing_since=Coalesce("failing_since", Value(now)),
        )
    endpoint_record_attempts(endpoint=endpoint, attempts=len(sent), failures=failures)


def _defer(claim: Claim, deferral: Deferral) -> None:
    """Release claimed deliveries without spending an attempt.

    A short wait has a countdown message. A delivery deferred to the sweeper, or one
    waiting longer than countdowns may, waits in the database and the sweeper enqueues it
    when due: workers hold countdown messages in memory and run them in turn with fresh
    ones, so a dead endpoint's refused backlog must not live there.
    """
    now = timezone.now()
    delay = deferral.seconds
    short_wait = not deferral.to_sweeper and delay <= conf.get().max_countdown_seconds
    ids = [delivery.pk for delivery in deferral.deliveries]
    due_at = now if deferral.due_now and short_wait else now + timedelta(seconds=delay)
    updated = release_claim(
        claim,
        deferral.deliveries,
        status=DeliveryStatus.PENDING,
        next_attempt_at=due_at,
        enqueued_at=now if short_wait else None,
    )
    ordered = any(delivery.ordering_key for delivery in deferral.deliveries)
    if updated and deferral.due_now and short_wait and not ordered:
        # No free slot: the batch holding one takes these rows along, or hands them on
        # once it frees it. It may have freed it before this release committed, though:
        # then a message for them now. (Ordered rows, never taken along, get a countdown.)
        endpoint = deferral.deliveries[0].endpoint
        transaction.on_commit(lambda: _enqueue_if_a_slot_is_free(endpoint, ids), robust=True)
    elif updated and short_wait:
        # robust: if the broker is down the rows are safe anyway; the sweeper enqueues them.
        countdown = max(delay, 0.01)
        transaction.on_commit(
            lambda: enqueue_deliveries(ids, countdown=countdown, one_endpoint=True), robust=True
        )


def _enqueue_if_a_slot_is_free(endpoint: Endpoint, ids: list[int]) -> None:
    if not endpoint_busy_wait(endpoint_id=endpoint.pk, max_in_flight=endpoint.max_in_flight):
        enqueue_deliveries(ids, one_endpoint=True)


def _enqueue_retries(retries: list[tuple[int, float]]) -> None:
    by_countdown: dict[float, list[int]] = defaultdict(list)
    for delivery_id, countdown in retries:
        by_countdown[countdown].append(delivery_id)
    for countdown, ids in by_countdown.items():
        enqueue_deliveries(ids, countdown=countdown, one_endpoint=True)
