"""The circuit breaker around each endpoint, moved by the outcomes of its attempts.

While an endpoint's recent error rate is high (Redis counts a sliding window shared by all
workers), its circuit opens: deliveries are deferred without spending attempts until a
cool-down passes, then one probe tests the water (half-open), and after a successful probe
traffic comes back gradually (see `breaker.rules` for the pure rules). The state lives on
the endpoint's row, every transition in `CircuitTransition`.
"""

import logging
from datetime import datetime
from uuid import UUID

import redis
from django.db import transaction
from django.utils import timezone

from deliveries.breaker import metrics, rules
from deliveries.breaker.shared import breaker_settings, health_store
from deliveries.endpoints.suspension import endpoint_suspend_if_failing
from deliveries.models import CircuitState, CircuitTransition, Endpoint

logger = logging.getLogger(__name__)


def endpoints_record_attempts(counts: list[tuple[Endpoint, int, int]]) -> None:
    """After rounds' attempts, inside their transaction (each endpoint's row is already
    locked by the caller's update of its counters): move the circuit breakers, suspend
    endpoints that keep failing. Per endpoint `(endpoint, attempts, failures)`; when some
    failed and some succeeded, the round's last attempt decides a half-open breaker.
    Each `endpoint` is as its round's owner read it."""
    quiet: dict[str, tuple[int, int]] = {}
    for endpoint, attempts, failures in counts:
        if not failures and endpoint.circuit_state == CircuitState.CLOSED:
            # The common case: nothing can open or close, only the window counts (for
            # all such endpoints in one exchange with Redis).
            quiet[str(endpoint.pk)] = (attempts, 0)
        else:
            _judge(endpoint.pk, attempts, failures)
    if not quiet:
        return
    try:
        health_store().count_outcomes(quiet, breaker_settings().window_seconds)
    except redis.RedisError:
        logger.warning("health counters unavailable; the circuit breaker skips attempts")


def _judge(endpoint_id: UUID, attempts: int, failures: int) -> None:
    row = (
        Endpoint.objects.filter(pk=endpoint_id)
        .values(
            "state",
            "circuit_state",
            "consecutive_failures",
            "failing_since",
            "suspend_after_failures",
            "suspend_window_seconds",
        )
        .first()
    )
    if row is None:
        return  # deleted meanwhile: no breaker left to move
    _move_breaker(endpoint_id, row["circuit_state"], attempts, failures)
    endpoint_suspend_if_failing(endpoint_id=endpoint_id, row=row)


def _move_breaker(endpoint_id: UUID, state: str, attempts: int, failures: int) -> None:
    breaker = breaker_settings()
    total = failed = 0
    if state == CircuitState.CLOSED:
        try:
            total, failed = health_store().record_outcomes(
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
    circuit_transition(
        endpoint_id=endpoint_id, from_state=state, to_state=next_state, reason=reason
    )


def circuit_transition(
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
            health_store().reset_window(str(endpoint_id), breaker_settings().window_seconds)
        except redis.RedisError:
            logger.warning("health counters unavailable; breaker window not reset")
    metrics.CIRCUIT_TRANSITIONS.labels(to_state=to_state).inc()
    logger.info("endpoint %s circuit %s -> %s: %s", endpoint_id, from_state, to_state, reason)
    return True
