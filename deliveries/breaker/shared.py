"""The breaker's settings and shared counters, and when an open circuit lets its probe
through: what fan-out and the gate read of the breaker without its transitions."""

from datetime import datetime, timedelta

from deliveries import conf
from deliveries.breaker import rules
from deliveries.breaker.store import HealthStore, get_store
from deliveries.models import CircuitState, Endpoint


def breaker_settings() -> rules.BreakerSettings:
    current = conf.health()
    return rules.BreakerSettings(
        error_rate=current.breaker_error_rate,
        min_attempts=current.breaker_min_attempts,
        window_seconds=current.breaker_window_seconds,
        cooldown_seconds=current.breaker_cooldown_seconds,
        ramp_seconds=current.breaker_ramp_seconds,
        probe_timeout_seconds=conf.get().lease_seconds,
    )


def health_store() -> HealthStore:
    return get_store(conf.health().redis_url)


def circuit_reopens_at(endpoint: Endpoint) -> datetime | None:
    """When an open circuit lets its probe through; None when the circuit is not open."""
    if endpoint.circuit_state != CircuitState.OPEN or endpoint.circuit_changed_at is None:
        return None
    return endpoint.circuit_changed_at + timedelta(seconds=breaker_settings().cooldown_seconds)
