"""The admission gate before a batch of requests to one endpoint.

`endpoint_admit` runs right before a batch is sent. It refuses, and the caller defers the
deliveries without spending attempts, when the endpoint's circuit is open (or its probe is
out), when all its `max_in_flight` slots are taken across all workers, or when a rate limit
is used up. An admitted batch holds up to `max_in_flight` slots and sends that many
requests at once; so one endpoint that never answers ties up at most that many requests,
and the rest of the worker keeps serving healthy endpoints.

A batch refused for want of a slot is deferred and stays due, with no new message: the
batch holding the slots takes due deliveries of its endpoint along, and hands the rest on
in a message once it frees its slots (see `attempt`), so the wait is about as long as a
slot takes to free, not a growing countdown.

If the shared counters (Redis) cannot be reached, admission lets the request through:
PostgreSQL, not Redis, guarantees delivery, and isolation is best effort for that moment.
"""

import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

import redis
from django.utils import timezone

from .. import conf
from ..health import metrics, rules
from ..models import CircuitState, Endpoint
from .breaker import breaker_settings, circuit_transition, health_store

logger = logging.getLogger(__name__)

# A refused batch waits at most this long for a slot (longer waits go to the sweeper).
MAX_SLOT_WAIT_SECONDS = 30.0
MIN_SLOT_WAIT_SECONDS = 0.05
# Refusals that mean "this endpoint is failing": its backlog is deferred to the sweeper.
TO_SWEEPER_REASONS = frozenset({"circuit_open", "circuit_half_open"})
# Requests one batch sends at once to an endpoint without an in-flight limit.
UNLIMITED_LANES = 8


@dataclass
class Admission:
    """The gate's answer for a batch of deliveries to one endpoint.

    An admitted batch holds `lanes` in-flight slots and sends that many requests at once;
    `how_many` caps the batch while the breaker probes or ramps up, and `next_request_wait`
    takes each further request from the rate limits.
    """

    admitted: bool
    retry_in_seconds: float = 0.0
    reason: str = ""
    # While half-open only the probe goes; during a ramp only this share of a batch.
    probe: bool = False
    share: float = 1.0
    # How long the part of a batch beyond the probe or the ramp's share is deferred.
    rest_wait_seconds: float = 0.0
    # Refused by the breaker: the batch is deferred to the sweeper, with no task message.
    to_sweeper: bool = False
    # Refused for want of a slot: the rows stay due, for the batch holding the slots.
    due_now: bool = False
    lanes: int = 1
    _release: Callable[[float], None] | None = field(default=None, repr=False)
    # Takes more slots (token, how many) for deliveries a batch takes along; returns how many.
    _acquire: Callable[[str, int], int] | None = field(default=None, repr=False)
    _token: str = field(default="", repr=False)
    _more: list[tuple[str, int]] = field(default_factory=list, repr=False)
    _rate_limits: Callable[[], float] | None = field(default=None, repr=False)
    _since: float = field(default_factory=time.monotonic, repr=False)

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

    def grow(self, wanted: int) -> None:
        """Hold up to `wanted` slots in all, if free: a batch that takes more deliveries
        along sends as many at once as the endpoint's limit allows, not only as many as
        it first had."""
        if self._acquire is None or wanted <= self.lanes:
            return
        token = f"{self._token}+{len(self._more)}"
        try:
            taken = self._acquire(token, wanted - self.lanes)
        except redis.RedisError:
            return
        if taken:
            self._more.append((token, taken))
            self.lanes += taken

    @property
    def holds_slots(self) -> bool:
        """Whether the batch holds in-flight slots (others may be waiting for them)."""
        return self._release is not None

    def release(self) -> None:
        """Free the in-flight slots (safe to call twice, and when none was taken)."""
        release, self._release = self._release, None
        if release is None:
            return
        try:
            release(time.monotonic() - self._since)
        except redis.RedisError:
            logger.warning("could not free in-flight slots; they expire with their lease")


def _refuse(reason: str, wait_seconds: float) -> Admission:
    metrics.DELIVERIES_DEFERRED.labels(reason=reason).inc()
    # Jitter spreads the deferred deliveries so they do not come back as one burst.
    wait = wait_seconds * random.uniform(1.0, 1.5)  # noqa: S311
    return Admission(False, wait, reason, to_sweeper=reason in TO_SWEEPER_REASONS)


def _request_seconds(endpoint: Endpoint) -> float:
    return float(endpoint.connect_timeout_seconds + endpoint.read_timeout_seconds)


def _probe_wait(endpoint: Endpoint) -> float:
    """How long the others wait while the half-open probe runs: its answer comes within
    one request's timeouts. Asking every second instead would make hundreds of waiting
    deliveries of a dead endpoint churn through claims and starve the healthy ones."""
    return max(rules.SHORT_WAIT_SECONDS, _request_seconds(endpoint))


def _slot_wait(held_seconds: float | None) -> float:
    """How long a batch refused for want of a slot waits: about as long as the
    endpoint's last batch held its slots (a slot frees, on average, half-way through
    that), and at least `WEBHOOKS_DEFER_SECONDS`. The deferred rows stay due: the batch
    holding the slots takes them along or hands them on when it ends, so this wait is
    only the fallback (for a batch that stopped early or died holding its slots); a
    shorter one would only make the refused messages of a busy endpoint spin through
    the worker."""
    floor = conf.health().defer_seconds
    draw = random.uniform(0.5, 1.0)  # noqa: S311
    wait = floor if held_seconds is None else max(floor, held_seconds * draw)
    metrics.DELIVERIES_DEFERRED.labels(reason="in_flight").inc()
    return min(max(wait, MIN_SLOT_WAIT_SECONDS), MAX_SLOT_WAIT_SECONDS)


def _in_flight_limit(endpoint_max_in_flight: int | None) -> int:
    limit = conf.health().endpoint_max_in_flight
    return limit if endpoint_max_in_flight is None else endpoint_max_in_flight


def endpoint_admit(*, endpoint: Endpoint, token: UUID | str, wanted: int = 1) -> Admission:
    """May a batch of `wanted` requests to this endpoint start now? If so, the caller must
    `release()` the admission when it is done (its slots also expire with the lease)."""
    settings = conf.health()
    now = timezone.now()
    breaker = breaker_settings()
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
    if probe and not circuit_transition(
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
    rest_wait = _probe_wait(endpoint) if probe else rules.SHORT_WAIT_SECONDS
    wanted = 1 if probe else max(1, wanted)

    key, slot = str(endpoint.pk), str(token)
    store = health_store()
    in_flight = _in_flight_limit(endpoint.max_in_flight)
    rate = settings.endpoint_rate_limit
    if endpoint.rate_limit_per_second is not None:
        rate = endpoint.rate_limit_per_second
    global_rate = settings.global_rate_limit

    def rate_limit_wait() -> float:
        wait = store.rate_limit_wait("endpoint", key, rate) if rate else 0.0
        if not wait and global_rate:
            wait = store.rate_limit_wait("global", "all", global_rate)
        return wait

    admitted = Admission(
        True,
        probe=probe,
        share=share,
        rest_wait_seconds=rest_wait,
        lanes=min(wanted, in_flight or UNLIMITED_LANES),
    )
    acquired = 0
    lease_seconds = conf.get().lease_seconds

    def release(held: float) -> None:
        try:
            store.release_slots(key, slot, acquired, held)
        finally:
            for token, count in admitted._more:
                store.release_slots(key, token, count, held)

    try:
        if in_flight:
            acquired = store.acquire_slots(key, slot, in_flight, lease_seconds, wanted)
            if not acquired:
                wait = _slot_wait(store.slot_wait(key, in_flight))
                return Admission(False, wait, "in_flight", due_now=True)
            admitted.lanes = acquired
        wait = rate_limit_wait() if rate or global_rate else 0.0
        if wait:
            if in_flight:
                store.release_slots(key, slot, acquired, 0.0)
            return _refuse("rate_limited", wait)
    except redis.RedisError:
        logger.warning("health counters unavailable; sending without isolation limits")
        if acquired:
            # Taken before the error: freed when the batch ends, so that no message of
            # the endpoint is refused for a slot nobody holds.
            admitted._release = release
        return admitted
    if in_flight:
        admitted._release = release
        admitted._token = slot
        admitted._acquire = lambda token, wanted: store.acquire_slots(
            key, token, in_flight, lease_seconds, wanted
        )
    if rate or global_rate:
        admitted._rate_limits = rate_limit_wait
    return admitted


def endpoint_busy_wait(*, endpoint_id: UUID, max_in_flight: int | None) -> float:
    """Seconds a batch for this endpoint should wait before it is even claimed: 0 when an
    in-flight slot is free (a hint; `endpoint_admit` decides). A saturated endpoint's
    messages are then put back in the queue without touching the database, which is what
    an endpoint that never answers costs the others while its circuit is still closed;
    its rows stay due, for the batch holding the slots to take along."""
    limit = _in_flight_limit(max_in_flight)
    if not limit:
        return 0.0
    try:
        held = health_store().slot_wait(str(endpoint_id), limit)
    except redis.RedisError:
        return 0.0
    return 0.0 if held == 0.0 else _slot_wait(held)
