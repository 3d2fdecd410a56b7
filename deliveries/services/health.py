"""Endpoint health and isolation: the admission gate before a request, the bookkeeping
after it, and automatic suspension with its notifications.

`endpoint_admit` runs right before a batch of requests to one endpoint. It refuses (and
the caller puts the deliveries off without spending attempts) when the endpoint's circuit
is open, when it already has `max_in_flight` batches out across all workers, or when a rate
limit is used up. So one endpoint that never answers can hold at most `max_in_flight`
worker threads; the rest of the pool keeps serving healthy endpoints.

`endpoint_record_attempts` runs inside the transaction that records a batch's attempts: it moves the
circuit breaker and suspends an endpoint that keeps failing.

If the shared counters (Redis) cannot be reached, admission lets the request through:
PostgreSQL, not Redis, guarantees delivery, and isolation is best effort for that moment.
"""

import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlsplit
from uuid import UUID

import redis
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from .. import conf, operational
from ..health import metrics, rules
from ..health.store import HealthStore, get_store
from ..models import CircuitState, CircuitTransition, Endpoint, EndpointState
from ..signals import endpoint_suspended
from .endpoints import endpoint_suspend
from .events import emit

logger = logging.getLogger(__name__)

# Deferrals for a saturated endpoint grow with the queue in front of it, up to this, so a
# large backlog is not re-claimed every second (longer waits go to the sweeper).
MAX_DEFER_SECONDS = 30.0
# Refusals that mean "this endpoint is failing": its backlog waits in the database.
PARKING_REASONS = frozenset({"circuit_open", "circuit_half_open"})


@dataclass
class Admission:
    """The gate's answer for a batch of deliveries to one endpoint.

    An admitted batch holds one in-flight slot and sends its requests one after another;
    `how_many` caps the batch while the breaker probes or ramps up, and `next_request_wait`
    takes each further request from the rate limits.
    """

    admitted: bool
    retry_in_seconds: float = 0.0
    reason: str = ""
    # While half-open only the probe goes; during a ramp only this share of a batch.
    probe: bool = False
    share: float = 1.0
    # How long the part of a batch that the probe or the ramp held back waits.
    held_back_seconds: float = 0.0
    # Refused by the breaker: the batch waits in the database, not in a countdown message.
    park: bool = False
    _release: Callable[[], None] | None = field(default=None, repr=False)
    _rate_limits: Callable[[], float] | None = field(default=None, repr=False)

    def how_many(self, waiting: int) -> int:
        if self.probe:
            return min(1, waiting)
        return max(1, math.floor(waiting * self.share)) if waiting else 0

    def next_request_wait(self) -> float:
        """0 when one more request may go now, else seconds until the limits allow it."""
        if self._rate_limits is None:
            return 0.0
        try:
            return self._rate_limits()
        except redis.RedisError:
            logger.warning("health counters unavailable; sending without rate limits")
            return 0.0

    def release(self) -> None:
        """Free the in-flight slot (safe to call twice, and when none was taken)."""
        release, self._release = self._release, None
        if release is None:
            return
        try:
            release()
        except redis.RedisError:
            logger.warning("could not free an in-flight slot; it expires with its lease")


def _breaker_settings() -> rules.BreakerSettings:
    current = conf.health()
    return rules.BreakerSettings(
        error_rate=current.breaker_error_rate,
        min_attempts=current.breaker_min_attempts,
        window_seconds=current.breaker_window_seconds,
        cooldown_seconds=current.breaker_cooldown_seconds,
        ramp_seconds=current.breaker_ramp_seconds,
        probe_timeout_seconds=conf.get().lease_seconds,
    )


def _store() -> HealthStore:
    return get_store(conf.health().redis_url)


def _refuse(reason: str, wait_seconds: float) -> Admission:
    metrics.DELIVERIES_DEFERRED.labels(reason=reason).inc()
    # Jitter spreads the deferred deliveries so they do not come back as one burst.
    wait = wait_seconds * random.uniform(1.0, 1.5)  # noqa: S311
    return Admission(False, wait, reason, park=reason in PARKING_REASONS)


def _probe_wait(endpoint: Endpoint) -> float:
    """How long the others wait while the half-open probe runs: its answer comes within
    one request's timeouts. Asking every second instead would make hundreds of waiting
    deliveries of a dead endpoint churn through claims and starve the healthy ones."""
    return max(
        rules.SHORT_WAIT_SECONDS,
        endpoint.connect_timeout_seconds + endpoint.read_timeout_seconds,
    )


def circuit_reopens_at(endpoint: Endpoint) -> datetime | None:
    """When an open circuit lets its probe through; None when the circuit is not open."""
    if endpoint.circuit_state != CircuitState.OPEN or endpoint.circuit_changed_at is None:
        return None
    return endpoint.circuit_changed_at + timedelta(seconds=_breaker_settings().cooldown_seconds)


def endpoint_admit(*, endpoint: Endpoint, token: UUID | str) -> Admission:
    """May a batch of requests to this endpoint start now? If so, the caller must
    `release()` the admission when it is done (its in-flight slot also expires with the
    lease)."""
    settings = conf.health()
    now = timezone.now()
    breaker = _breaker_settings()
    verdict = rules.breaker_verdict(
        state=endpoint.circuit_state,
        changed_at=endpoint.circuit_changed_at,
        now=now,
        settings=breaker,
        draw=random.random(),  # noqa: S311 (a share of traffic, not a secret)
    )
    if verdict.action == verdict.WAIT:
        wait = verdict.wait_seconds
        if verdict.reason == "circuit_half_open":
            wait = _probe_wait(endpoint)
        elif verdict.reason == "circuit_open":
            # Deliveries refused at different moments would all come back when the
            # cool-down ends, as one burst of claims that delays every other endpoint's
            # deliveries in the same worker; spread their return over a whole cool-down.
            wait += random.uniform(0, breaker.cooldown_seconds)  # noqa: S311
        return _refuse(verdict.reason, wait)
    probe = verdict.action == verdict.PROBE
    if probe and not _circuit_transition(
        endpoint_id=endpoint.pk,
        from_state=endpoint.circuit_state,
        to_state=CircuitState.HALF_OPEN,
        reason=verdict.reason,
        seen_changed_at=endpoint.circuit_changed_at,
    ):
        return _refuse("circuit_half_open", _probe_wait(endpoint))
    share = 1.0
    if not probe and endpoint.circuit_changed_at is not None:
        elapsed = (now - endpoint.circuit_changed_at).total_seconds()
        share = rules.ramp_share(seconds_since_closed=elapsed, settings=breaker)
    held_back = _probe_wait(endpoint) if probe else rules.SHORT_WAIT_SECONDS

    key, slot = str(endpoint.pk), str(token)
    store = _store()
    in_flight = settings.endpoint_max_in_flight
    if endpoint.max_in_flight is not None:
        in_flight = endpoint.max_in_flight
    rate = settings.endpoint_rate_limit
    if endpoint.rate_limit_per_second is not None:
        rate = endpoint.rate_limit_per_second
    global_rate = settings.global_rate_limit

    def rate_limit_wait() -> float:
        wait = store.rate_limit_wait("endpoint", key, rate) if rate else 0.0
        if not wait and global_rate:
            wait = store.rate_limit_wait("global", "all", global_rate)
        return wait

    try:
        if in_flight and not store.acquire_slot(key, slot, in_flight, conf.get().lease_seconds):
            queued = store.note_denial(key)
            wait = min(settings.defer_seconds * max(1.0, queued / in_flight), MAX_DEFER_SECONDS)
            return _refuse("in_flight", wait)
        wait = rate_limit_wait() if rate or global_rate else 0.0
        if wait:
            if in_flight:
                store.release_slot(key, slot)
            return _refuse("rate_limited", wait)
    except redis.RedisError:
        logger.warning("health counters unavailable; sending without isolation limits")
        return Admission(True, probe=probe, share=share, held_back_seconds=held_back)
    return Admission(
        True,
        probe=probe,
        share=share,
        held_back_seconds=held_back,
        _release=(lambda: store.release_slot(key, slot)) if in_flight else None,
        _rate_limits=rate_limit_wait if rate or global_rate else None,
    )


def endpoint_busy_wait(*, endpoint_id: UUID, max_in_flight: int | None) -> float:
    """Seconds a batch for this endpoint should wait before it is even claimed: 0 when an
    in-flight slot is free (a hint; `endpoint_admit` decides). A saturated endpoint's
    messages are then put back in the queue without touching the database, which is what
    an endpoint that never answers costs the others while its circuit is still closed."""
    settings = conf.health()
    limit = settings.endpoint_max_in_flight if max_in_flight is None else max_in_flight
    if not limit:
        return 0.0
    key = str(endpoint_id)
    try:
        store = _store()
        if store.slot_free(key, limit):
            return 0.0
        queued = store.note_denial(key)
    except redis.RedisError:
        return 0.0
    wait = min(settings.defer_seconds * max(1.0, queued / limit), MAX_DEFER_SECONDS)
    return _refuse("in_flight", wait).retry_in_seconds


def endpoint_record_attempts(*, endpoint: Endpoint, attempts: int, failures: int) -> None:
    """After a batch's attempts, inside their transaction (the endpoint row is already
    locked by the caller's update of its counters): move the circuit breaker, suspend an
    endpoint that keeps failing. `failures` of the `attempts` failed; when some failed and
    some succeeded, the batch's last attempt decides a half-open breaker. `endpoint` is
    as the batch's claim read it."""
    endpoint_id = endpoint.pk
    if not failures and endpoint.circuit_state == CircuitState.CLOSED:
        # The common case: nothing can open or close, only the window counts.
        try:
            _store().record_outcomes(
                str(endpoint_id), attempts, 0, _breaker_settings().window_seconds
            )
        except redis.RedisError:
            logger.warning("health counters unavailable; the circuit breaker skips attempts")
        return
    now = timezone.now()
    row = Endpoint.objects.filter(pk=endpoint_id).values(
        "state",
        "circuit_state",
        "consecutive_failures",
        "failing_since",
        "suspend_after_failures",
        "suspend_window_seconds",
    )[0]
    _move_breaker(endpoint_id, row["circuit_state"], attempts, failures)
    # The endpoint's consecutive failures are those after its last success.
    if not row["consecutive_failures"] or row["state"] != EndpointState.ACTIVE:
        return
    settings = conf.health()
    threshold = row["suspend_after_failures"]
    window = row["suspend_window_seconds"]
    threshold = settings.suspend_after_failures if threshold is None else threshold
    window = settings.suspend_window_seconds if window is None else window
    if rules.should_suspend(
        consecutive_failures=row["consecutive_failures"],
        failing_since=row["failing_since"],
        now=now,
        threshold=threshold,
        window_seconds=window,
    ):
        since = f"{row['failing_since']:%Y-%m-%d %H:%M:%S}"
        endpoint_suspend_automatically(
            endpoint_id=endpoint_id,
            reason=f"{row['consecutive_failures']} consecutive failed attempts since {since}",
        )


def _move_breaker(endpoint_id: UUID, state: str, attempts: int, failures: int) -> None:
    breaker = _breaker_settings()
    total = failed = 0
    if state == CircuitState.CLOSED:
        try:
            total, failed = _store().record_outcomes(
                str(endpoint_id), attempts, failures, breaker.window_seconds
            )
        except redis.RedisError:
            logger.warning("health counters unavailable; the circuit breaker skips attempts")
            return
    next_state = rules.after_attempt(
        state=state, succeeded=failures == 0, total=total, failed=failed, settings=breaker
    )
    if next_state is None:
        return
    if next_state == CircuitState.OPEN and state == CircuitState.CLOSED:
        reason = f"{failed} of {total} attempts failed in {breaker.window_seconds:g}s"
    elif next_state == CircuitState.OPEN:
        reason = "the probe failed"
    else:
        reason = "the probe succeeded; traffic ramps up"
    _circuit_transition(
        endpoint_id=endpoint_id, from_state=state, to_state=next_state, reason=reason
    )


def _circuit_transition(
    *,
    endpoint_id: UUID,
    from_state: str,
    to_state: str,
    reason: str,
    seen_changed_at: datetime | None = None,
) -> bool:
    """Move the breaker if it is still where we saw it; of racing workers one wins."""
    now = timezone.now()
    with transaction.atomic():
        current = Endpoint.objects.filter(pk=endpoint_id, circuit_state=from_state)
        if to_state == CircuitState.HALF_OPEN:
            current = current.filter(circuit_changed_at=seen_changed_at)
        if not current.update(circuit_state=to_state, circuit_changed_at=now):
            return False
        CircuitTransition.objects.create(
            endpoint_id=endpoint_id,
            from_state=from_state,
            to_state=to_state,
            reason=reason[:500],
            at=now,
        )
    if to_state != CircuitState.HALF_OPEN:
        # A fresh window after every open and close: old failures must not re-open it.
        try:
            _store().reset_window(str(endpoint_id), _breaker_settings().window_seconds)
        except redis.RedisError:
            logger.warning("health counters unavailable; breaker window not reset")
    metrics.CIRCUIT_TRANSITIONS.labels(to_state=to_state).inc()
    logger.info("endpoint %s circuit %s -> %s: %s", endpoint_id, from_state, to_state, reason)
    return True


def endpoint_suspend_automatically(*, endpoint_id: UUID, reason: str) -> bool:
    """Suspend an endpoint the platform gave up on, and tell its owner and subscribers.

    In one transaction: the suspension (its pending deliveries are held) and the
    operational event `endpoint.suspended`. After commit: the `endpoint_suspended` signal
    and an email to the endpoint's owner. Returns False when it was not active.
    """
    with transaction.atomic():
        if not endpoint_suspend(endpoint_id=endpoint_id, reason=reason):
            return False
        endpoint = Endpoint.objects.get(pk=endpoint_id)
        emit(
            operational.ENDPOINT_SUSPENDED,
            {
                "endpoint_id": str(endpoint.pk),
                "description": endpoint.description,
                "reason": endpoint.state_reason,
                "suspended_at": (endpoint.state_changed_at or timezone.now()).isoformat(),
            },
            # The endpoint's own tenant hears of it; another tenant must not.
            tenant=endpoint.tenant,
        )
        transaction.on_commit(lambda: _notify_suspension(endpoint), robust=True)
    metrics.ENDPOINTS_AUTO_SUSPENDED.inc()
    logger.warning("endpoint %s suspended: %s", endpoint_id, reason)
    return True


def _notify_suspension(endpoint: Endpoint) -> None:
    endpoint_suspended.send(sender=Endpoint, endpoint=endpoint, reason=endpoint.state_reason)
    if not endpoint.owner_email:
        return
    # Only the host: a URL's path or query may carry the receiver's own token.
    host = urlsplit(endpoint.url).hostname or "?"
    send_mail(
        subject=f"Webhook endpoint suspended: {endpoint.description or host}",
        message=(
            f"We stopped sending webhooks to your endpoint {endpoint.pk} ({host}).\n\n"
            f"Reason: {endpoint.state_reason}\n\n"
            "Deliveries are held, not lost. Fix the receiver, then ask an operator to "
            "resume the endpoint; held deliveries are sent then."
        ),
        from_email=None,
        recipient_list=[endpoint.owner_email],
    )
