"""One delivery attempt: claim the row, sign, POST, record the outcome.

The claim is a single conditional UPDATE, so of two task messages for the same delivery
(a duplicate from the broker, a sweeper re-enqueue) only one sends; the other finds
nothing to claim. The lease token written by the claim guards the write-back: a worker
whose lease expired and was taken over cannot overwrite the newer outcome.
"""

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from .. import conf, observability, ordering, payloads, rendering, signing, transport
from ..models import Attempt, Delivery, DeliveryStatus, Endpoint, EndpointState, Event
from ..retry_policy import Decision, Verdict, decide
from .enqueue import enqueue_deliveries
from .finished import on_delivery_outcome
from .health import endpoint_admit, endpoint_record_attempt, endpoint_suspend_automatically

REDACTED = "[redacted]"
SENSITIVE_HEADER_WORDS = ("signature", "authorization", "secret", "token", "key", "cookie")


class Outcome:
    """What `delivery_attempt` did; tests and logs assert on these strings."""

    NOT_CLAIMED = "not_claimed"
    HELD = "held"
    SUCCEEDED = "succeeded"
    RETRY_SCHEDULED = "retry_scheduled"
    DEAD_LETTERED = "dead_lettered"
    LEASE_LOST = "lease_lost"
    # Put off without spending an attempt: breaker open, in-flight or rate limit reached.
    DEFERRED = "deferred"


@dataclass(frozen=True)
class Claim:
    delivery: Delivery
    token: uuid.UUID
    now: datetime


def delivery_claim(*, delivery_id: int) -> Claim | None:
    """Take the row for this worker, or None when it is not due or someone else has it."""
    now = timezone.now()
    token = uuid.uuid4()
    lease = timedelta(seconds=conf.get().lease_seconds)
    claimable = Q(status=DeliveryStatus.PENDING, next_attempt_at__lte=now) | Q(
        status=DeliveryStatus.SENDING, lease_expires_at__lt=now
    )
    claimable &= ordering.claimable_in_order()
    claimed = (
        Delivery.objects.filter(claimable, pk=delivery_id).update(
            status=DeliveryStatus.SENDING,
            lease_token=token,
            lease_expires_at=now + lease,
            attempts=F("attempts") + 1,
            updated_at=now,
        )
        == 1
    )
    if not claimed:
        return None
    delivery = Delivery.objects.select_related("event", "endpoint").get(pk=delivery_id)
    return Claim(delivery=delivery, token=token, now=now)


def render_body(event: Event, endpoint: Endpoint | None = None) -> bytes:
    version, data = rendering.versioned_payload(event, endpoint)
    occurred_at = event.occurred_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    envelope = {
        "id": str(event.id),
        "type": event.type,
        "version": version,
        "occurred_at": occurred_at,
        "data": data,
    }
    return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def build_headers(
    delivery: Delivery, body: bytes, secrets: list[str], timestamp: int
) -> dict[str, str]:
    event_id = str(delivery.event_id)
    headers = {str(k): str(v) for k, v in (delivery.endpoint.custom_headers or {}).items()}
    ours = {
        "Content-Type": "application/json",
        "X-Webhook-Id": event_id,
        "X-Webhook-Event": delivery.event.type,
        "X-Webhook-Timestamp": str(timestamp),
        "X-Webhook-Replay": "true" if delivery.is_replay else "false",
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        **signing.signature_headers(secrets, msg_id=event_id, timestamp=timestamp, body=body),
        **({"traceparent": delivery.event.traceparent} if delivery.event.traceparent else {}),
    }
    # Our headers win over custom ones, whatever their case.
    reserved = {name.lower() for name in ours}
    headers = {k: v for k, v in headers.items() if k.lower() not in reserved}
    headers.update(ours)
    return headers


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    return {
        name: REDACTED if any(word in name.lower() for word in SENSITIVE_HEADER_WORDS) else value
        for name, value in headers.items()
    }


def delivery_attempt(*, delivery_id: int) -> str:
    """Run one attempt of a delivery if it can be claimed. Returns an `Outcome` string."""
    claim = delivery_claim(delivery_id=delivery_id)
    if claim is None:
        return Outcome.NOT_CLAIMED
    delivery, endpoint, now = claim.delivery, claim.delivery.endpoint, claim.now

    if endpoint.state != EndpointState.ACTIVE:
        _release(claim, status=DeliveryStatus.HELD, give_back_attempt=True)
        return Outcome.HELD
    if delivery.attempts_in_cycle > endpoint.max_attempts:
        # Only reachable when workers died during earlier attempts and leases expired.
        decision = Decision(Verdict.DEAD_LETTER, reason="attempts exhausted (worker lost)")
        _finish(claim, decision, status_code=None, error="worker lost during the last attempt")
        return Outcome.DEAD_LETTERED

    # Before any costly work: a refused delivery is put off cheaply, spending no attempt.
    admission = endpoint_admit(endpoint=endpoint, token=claim.token)
    if not admission.admitted:
        _defer(claim, delay_seconds=admission.retry_in_seconds)
        return Outcome.DEFERRED

    secrets = [s.value for s in endpoint.secrets.unexpired(now)]
    if not secrets:
        admission.release()
        decision = Decision(Verdict.DEAD_LETTER, reason="endpoint has no unexpired secret")
        _finish(claim, decision, status_code=None, error="no unexpired signing secret")
        return Outcome.DEAD_LETTERED

    try:
        body = render_body(delivery.event, endpoint)
    except payloads.PayloadUnavailable as exc:
        # Our storage, not the endpoint, failed: no request, no health penalty; the
        # delivery retries on its usual backoff and shows the error.
        admission.release()
        decision = decide(
            policy=endpoint.retry_policy,
            attempt_number=delivery.attempts_in_cycle,
            status_code=None,
            retry_after=None,
            first_attempt_at=delivery.first_attempt_at or now,
            now=timezone.now(),
        )
        return _finish(claim, decision, status_code=None, error=str(exc))
    headers = build_headers(delivery, body, secrets, timestamp=int(now.timestamp()))
    started_at = timezone.now()
    try:
        result = transport.post(
            endpoint.url,
            body,
            headers,
            connect_timeout=endpoint.connect_timeout_seconds,
            read_timeout=endpoint.read_timeout_seconds,
            excerpt_limit=conf.get().response_body_limit,
            policy=conf.address_policy(),
        )
    finally:
        admission.release()
    finished_at = timezone.now()
    decision = decide(
        policy=endpoint.retry_policy,
        attempt_number=delivery.attempts_in_cycle,
        status_code=result.status_code,
        retry_after=result.retry_after,
        first_attempt_at=delivery.first_attempt_at or started_at,
        now=finished_at,
    )
    attempt = Attempt(
        delivery_id=delivery.pk,
        number=delivery.attempts,
        started_at=started_at,
        duration_ms=result.duration_ms,
        request_headers=redact_headers(headers),
        response_status=result.status_code,
        response_body=result.body_excerpt,
        error=result.error,
    )
    error = result.error or (
        f"HTTP {result.status_code}" if decision.verdict != Verdict.SUCCEEDED else ""
    )
    return _finish(claim, decision, status_code=result.status_code, error=error, attempt=attempt)


def _finish(
    claim: Claim,
    decision: Decision,
    *,
    status_code: int | None,
    error: str,
    attempt: Attempt | None = None,
) -> str:
    """Record the attempt, the delivery's new state and the endpoint's health together."""
    now = timezone.now()
    delivery = claim.delivery
    settings = conf.get()
    fields: dict[str, object] = {
        "lease_token": None,
        "lease_expires_at": None,
        "last_status_code": status_code,
        "last_error": (error if not decision.reason else f"{error} ({decision.reason})")[:2000],
        "updated_at": now,
    }
    countdown: float | None = None
    if decision.verdict == Verdict.SUCCEEDED:
        fields.update(status=DeliveryStatus.SUCCEEDED, completed_at=now, next_attempt_at=None)
        outcome = Outcome.SUCCEEDED
    elif decision.verdict == Verdict.RETRY:
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

    with transaction.atomic():
        if attempt is not None:
            attempt.save(force_insert=True)
            # The retry window runs from the first request actually made, not from a
            # claim that found the endpoint suspended.
            fields["first_attempt_at"] = Coalesce("first_attempt_at", Value(attempt.started_at))
        updated = Delivery.objects.filter(pk=delivery.pk, lease_token=claim.token).update(**fields)
        if attempt is not None:
            _record_endpoint_health(delivery.endpoint, succeeded=outcome == Outcome.SUCCEEDED)
        if decision.suspend_endpoint and updated:
            endpoint_suspend_automatically(
                endpoint_id=delivery.endpoint_id,
                reason=f"receiver answered {status_code} (Gone)",
            )
        if updated:
            on_delivery_outcome(delivery, outcome)
        if updated and countdown is not None:
            transaction.on_commit(
                lambda: enqueue_deliveries([delivery.pk], countdown=countdown), robust=True
            )
    outcome = outcome if updated else Outcome.LEASE_LOST
    observability.attempt_recorded(
        delivery=delivery, attempt=attempt, outcome=outcome, status_code=status_code, error=error
    )
    return outcome


def _record_endpoint_health(endpoint: Endpoint, *, succeeded: bool) -> None:
    now = timezone.now()
    if succeeded:
        Endpoint.objects.filter(pk=endpoint.pk).update(
            consecutive_failures=0, last_success_at=now, failing_since=None
        )
    else:
        Endpoint.objects.filter(pk=endpoint.pk).update(
            consecutive_failures=F("consecutive_failures") + 1,
            last_failure_at=now,
            failing_since=Coalesce("failing_since", Value(now)),
        )
    endpoint_record_attempt(endpoint_id=endpoint.pk, succeeded=succeeded)


def _release(claim: Claim, *, status: str, give_back_attempt: bool) -> None:
    Delivery.objects.filter(pk=claim.delivery.pk, lease_token=claim.token).update(
        status=status,
        lease_token=None,
        lease_expires_at=None,
        attempts=F("attempts") - 1 if give_back_attempt else F("attempts"),
        updated_at=timezone.now(),
    )


def _defer(claim: Claim, *, delay_seconds: float) -> None:
    """Give the claim back without spending an attempt; try again after the delay."""
    now = timezone.now()
    short_wait = delay_seconds <= conf.get().max_countdown_seconds
    updated = Delivery.objects.filter(pk=claim.delivery.pk, lease_token=claim.token).update(
        status=DeliveryStatus.PENDING,
        lease_token=None,
        lease_expires_at=None,
        attempts=F("attempts") - 1,
        next_attempt_at=now + timedelta(seconds=delay_seconds),
        # Long waits have no message out: the sweeper enqueues them when due.
        enqueued_at=now if short_wait else None,
        updated_at=now,
    )
    if updated and short_wait:
        # robust: if the broker is down the row is safe anyway; the sweeper enqueues it.
        countdown = max(delay_seconds, 0.01)
        transaction.on_commit(
            lambda: enqueue_deliveries([claim.delivery.pk], countdown=countdown), robust=True
        )


class DeliveryNotRetryable(Exception):
    """The delivery is in flight or held; a manual retry would change nothing."""


def delivery_retry(*, delivery_id: int) -> Delivery:
    """Send a delivery again now, with a fresh retry cycle (operator or API action).

    Works for succeeded, dead-lettered, cancelled and pending deliveries; the request
    goes through the same claim, signing and backoff path as any other.
    """
    now = timezone.now()
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update(of=("self",))
            .select_related("endpoint")
            .get(pk=delivery_id)
        )
        if delivery.status in (DeliveryStatus.SENDING, DeliveryStatus.HELD):
            raise DeliveryNotRetryable(f"delivery is {delivery.status}")
        if delivery.endpoint.state != EndpointState.ACTIVE:
            raise DeliveryNotRetryable(f"endpoint is {delivery.endpoint.state}")
        delivery.status = DeliveryStatus.PENDING
        delivery.attempts_before_cycle = delivery.attempts
        delivery.first_attempt_at = None
        delivery.completed_at = None
        delivery.next_attempt_at = now
        delivery.enqueued_at = now
        delivery.save()
        transaction.on_commit(lambda: enqueue_deliveries([delivery.pk]), robust=True)
    return delivery
