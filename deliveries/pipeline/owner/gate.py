"""The gate an endpoint's owner asks before it sends: how many requests at once, and
whether each next request may go now.

- **The breaker** (`breaker.rules`): an open circuit sends nothing until its cool-down ends,
  then one probe (half-open); after a good probe traffic ramps back up.
- **The in-flight limit**: the owner's lanes. One owner per endpoint sends at most
  `max_in_flight` requests at once; no shared counter is needed, and none can be left
  behind by a worker that died.
- **The rate limits** (per endpoint and global, shared by all workers in Redis): every
  request, the first of a round included, takes its token from them.

If the shared rate counters (Redis) cannot be reached, requests go without rate limits:
PostgreSQL, not Redis, guarantees delivery, and the limit is best effort for that moment.
"""

import logging
import math
import random
from dataclasses import dataclass

import redis
from django.utils import timezone

from deliveries import conf, metrics
from deliveries.breaker import rules
from deliveries.breaker.shared import breaker_settings, health_store
from deliveries.breaker.transitions import circuit_transition
from deliveries.endpoints.validation import granted_rate as validation_granted_rate
from deliveries.models import CircuitState, Endpoint

logger = logging.getLogger(__name__)

# Requests one owner sends at once to an endpoint without an in-flight limit.
UNLIMITED_LANES = 8


@dataclass(frozen=True)
class Gate:
    """How many requests may be open at once now (0: none), and, when none, how long
    until it is worth asking again."""

    lanes: int
    hold_seconds: float = 0.0
    reason: str = ""
    probe: bool = False


def in_flight_limit(endpoint: Endpoint) -> int:
    limit = conf.health().endpoint_max_in_flight
    if endpoint.max_in_flight is not None:
        limit = endpoint.max_in_flight
    return limit or UNLIMITED_LANES


def _request_seconds(endpoint: Endpoint) -> float:
    return float(endpoint.connect_timeout_seconds + endpoint.read_timeout_seconds)


def probe_wait(endpoint: Endpoint) -> float:
    """How long the others wait while the half-open probe runs: its answer comes within
    one request's deadline."""
    return max(rules.SHORT_WAIT_SECONDS, _request_seconds(endpoint))


def _closed(reason: str, seconds: float) -> Gate:
    metrics.DELIVERIES_DEFERRED.labels(reason=reason).inc()
    return Gate(0, seconds, reason)


def endpoint_gate(*, endpoint: Endpoint) -> Gate:
    """The breaker's word on the endpoint as just read; takes the probe (moves the circuit
    to half-open) when it is time for one."""
    breaker = breaker_settings()
    now = timezone.now()
    verdict = rules.breaker_verdict(
        state=endpoint.circuit_state,
        changed_at=endpoint.circuit_changed_at,
        now=now,
        settings=breaker,
        draw=random.random(),  # noqa: S311 (a share of traffic, not a secret)
    )
    if verdict.action == verdict.WAIT:
        if verdict.reason == "circuit_half_open":
            return _closed(verdict.reason, probe_wait(endpoint))
        return _closed(verdict.reason, verdict.wait_seconds)
    limit = in_flight_limit(endpoint)
    if verdict.action == verdict.PROBE:
        if not circuit_transition(
            endpoint_id=endpoint.pk,
            from_state=endpoint.circuit_state,
            to_state=CircuitState.HALF_OPEN,
            reason=verdict.reason,
            seen_changed_at=endpoint.circuit_changed_at,
        ):
            return _closed("circuit_half_open", probe_wait(endpoint))
        endpoint.circuit_state = CircuitState.HALF_OPEN
        return Gate(1, reason="probe", probe=True)
    if endpoint.circuit_changed_at is not None and endpoint.circuit_state == CircuitState.CLOSED:
        elapsed = (now - endpoint.circuit_changed_at).total_seconds()
        share = rules.ramp_share(seconds_since_closed=elapsed, settings=breaker)
        if share < 1:
            return Gate(max(1, math.floor(limit * share)), reason="ramp")
    return Gate(limit)


def rate_limit_wait(*, endpoint: Endpoint) -> float:
    """Take one request from the endpoint's and the global rate limit: 0 when it may go
    now, else seconds until one may."""
    settings = conf.health()
    rate = settings.endpoint_rate_limit
    if endpoint.rate_limit_per_second is not None:
        rate = endpoint.rate_limit_per_second
    global_rate = settings.global_rate_limit
    # What the target granted in the CloudEvents handshake (per minute): both apply.
    granted = validation_granted_rate(endpoint)
    if not rate and not global_rate and not granted:
        return 0.0
    store = health_store()
    try:
        wait = store.rate_limit_wait("endpoint", str(endpoint.pk), rate) if rate else 0.0
        if not wait and granted:
            wait = store.rate_limit_wait("granted", str(endpoint.pk), granted, seconds=60)
        if not wait and global_rate:
            wait = store.rate_limit_wait("global", "all", global_rate)
    except redis.RedisError:
        logger.warning("health counters unavailable; sending without rate limits")
        return 0.0
    if wait:
        metrics.DELIVERIES_DEFERRED.labels(reason="rate_limited").inc()
    return wait
