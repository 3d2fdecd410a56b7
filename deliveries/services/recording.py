"""Writing back an owner's results: their attempts, each delivery's new state and the
endpoint's health, in one transaction, then the signals, metrics and logs. A retry
needs no message: the owner sends it when it falls due soon, else wakes the endpoint
with a countdown or leaves it to the sweeper (`owner`)."""

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from .. import observability
from ..models import Attempt, CircuitState, Delivery, DeliveryStatus, Endpoint
from ..retry_policy import Decision, Verdict
from .breaker import circuit_transition, endpoint_record_attempts
from .finished import on_delivery_outcome
from .outcomes import DeliveryOutcome
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
    starts = [r.attempt.started_at for r in results if r.attempt is not None]
    if len(starts) == len(results):
        # A row without a first attempt yet had it in this round: the round's first start
        # (its requests start within one request's time), without the subquery.
        return Coalesce("first_attempt_at", Value(min(starts)))
    return _FIRST_ATTEMPT_OF_CYCLE


@dataclass(frozen=True)
class DeliveryClaim:
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
    claim: DeliveryClaim, deliveries: list[Delivery], *, status: str, **fields: object
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
    again after `seconds`."""

    deliveries: list[Delivery]
    seconds: float = 0.0


def record(
    claim: DeliveryClaim, endpoint: Endpoint, results: list[Result], deferral: Deferral
) -> dict[int, str]:
    """Record one endpoint's results and defer the deliveries that were not sent.

    Returns each delivery's outcome (`LEASE_LOST` where another worker took it over).
    """
    now = timezone.now()
    outcomes: dict[int, str] = {}
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
                outcomes[delivery.pk] = DeliveryOutcome.LEASE_LOST
                continue
            if result.decision.verdict == Verdict.SUCCEEDED:
                # The common case: one statement for all of them (per status code).
                outcome = DeliveryOutcome.SUCCEEDED
                succeeded[result.status_code].append(result)
            else:
                outcome = _record_failure(claim, result, now)
            outcomes[delivery.pk] = outcome
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
        sent = [r for r in results if r.attempt is not None and not r.local_failure]
        if sent:
            _record_endpoint_health(endpoint, sent)
        elif endpoint.circuit_state == CircuitState.HALF_OPEN and results:
            # The probe failed on our side: nothing was learnt of the endpoint, so the
            # circuit goes back to open and a later probe tries again.
            circuit_transition(
                endpoint_id=endpoint.pk,
                from_state=CircuitState.HALF_OPEN,
                to_state=CircuitState.OPEN,
                reason="the probe was not sent (an error on our side)",
            )
        gone = next((r for r in results if r.decision.suspend_endpoint), None)
        if gone is not None and gone.delivery.pk in owned:
            endpoint_suspend_automatically(
                endpoint_id=endpoint.pk,
                reason=f"receiver answered {gone.status_code} (Gone)",
            )
        if deferral.deliveries:
            _defer(claim, deferral)
            outcomes.update(
                (delivery.pk, DeliveryOutcome.DEFERRED) for delivery in deferral.deliveries
            )
    for result in results:
        observability.attempt_recorded(
            delivery=result.delivery,
            attempt=result.attempt,
            outcome=outcomes[result.delivery.pk],
            status_code=result.status_code,
            error=result.error,
        )
    return outcomes


def _record_failure(claim: DeliveryClaim, result: Result, now: datetime) -> str:
    """Record a retry or a dead letter; returns the outcome."""
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
    if decision.verdict == Verdict.RETRY:
        fields.update(
            status=DeliveryStatus.PENDING,
            next_attempt_at=now + timedelta(seconds=decision.delay_seconds),
        )
        outcome = DeliveryOutcome.RETRY_SCHEDULED
    else:
        fields.update(status=DeliveryStatus.DEAD_LETTERED, completed_at=now, next_attempt_at=None)
        outcome = DeliveryOutcome.DEAD_LETTERED
    updated = Delivery.objects.filter(pk=result.delivery.pk, lease_token=claim.token).update(
        **fields
    )
    return outcome if updated else DeliveryOutcome.LEASE_LOST


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
        written: dict[str, Any] = {
            "consecutive_failures": trailing,
            "last_success_at": now,
            "failing_since": now if trailing else None,
            **({"last_failure_at": now} if trailing else {}),
        }
        Endpoint.objects.filter(pk=endpoint.pk).update(**written)
        _remember(endpoint, written)
    else:
        Endpoint.objects.filter(pk=endpoint.pk).update(
            consecutive_failures=F("consecutive_failures") + failures,
            last_failure_at=now,
            failing_since=Coalesce("failing_since", Value(now)),
        )
        _remember(
            endpoint,
            {
                "consecutive_failures": endpoint.consecutive_failures + failures,
                "last_failure_at": now,
                "failing_since": endpoint.failing_since or now,
            },
        )
    endpoint_record_attempts(endpoint=endpoint, attempts=len(sent), failures=failures)


def _remember(endpoint: Endpoint, written: dict[str, Any]) -> None:
    """Keep the owner's copy of the endpoint as just written, so that its next round
    judges "written recently" by our own write (else every round after the first second
    would write the row again)."""
    for name, value in written.items():
        setattr(endpoint, name, value)


def _defer(claim: DeliveryClaim, deferral: Deferral) -> None:
    """Release claimed deliveries without spending an attempt, due after `seconds`; their
    owner (or the next) sends them then."""
    release_claim(
        claim,
        deferral.deliveries,
        status=DeliveryStatus.PENDING,
        next_attempt_at=timezone.now() + timedelta(seconds=deferral.seconds),
    )
