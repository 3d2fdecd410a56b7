"""The sending side's settings, with their defaults, in one place (see the README table)."""

from dataclasses import dataclass

from django.conf import settings

from .ssrf import AddressPolicy, parse_networks


@dataclass(frozen=True)
class DeliverySettings:
    max_countdown_seconds: float
    lease_seconds: float
    fanout_grace_seconds: float
    requeue_grace_seconds: float
    sweep_batch_size: int
    batch_size: int = 50
    batch_seconds: float = 5.0
    response_body_limit: int = 2048
    require_declared_types: bool = True
    event_type_modules: tuple[str, ...] = ()
    cloudevents_source: str = "/webhooks"


def get() -> DeliverySettings:
    return DeliverySettings(
        max_countdown_seconds=getattr(settings, "WEBHOOKS_MAX_COUNTDOWN_SECONDS", 60.0),
        lease_seconds=getattr(settings, "WEBHOOKS_LEASE_SECONDS", 120.0),
        fanout_grace_seconds=getattr(settings, "WEBHOOKS_FANOUT_GRACE_SECONDS", 30.0),
        requeue_grace_seconds=getattr(settings, "WEBHOOKS_REQUEUE_GRACE_SECONDS", 120.0),
        sweep_batch_size=getattr(settings, "WEBHOOKS_SWEEP_BATCH_SIZE", 500),
        batch_size=getattr(settings, "WEBHOOKS_DELIVERY_BATCH_SIZE", 50),
        batch_seconds=getattr(settings, "WEBHOOKS_DELIVERY_BATCH_SECONDS", 5.0),
        require_declared_types=getattr(settings, "WEBHOOKS_REQUIRE_DECLARED_TYPES", True),
        event_type_modules=tuple(getattr(settings, "WEBHOOKS_EVENT_TYPE_MODULES", ())),
        cloudevents_source=getattr(settings, "WEBHOOKS_CLOUDEVENTS_SOURCE", "/webhooks"),
    )


@dataclass(frozen=True)
class HealthSettings:
    """Endpoint health and isolation (auto-suspension, breaker, limits, SSRF guard)."""

    allowed_networks: tuple[str, ...]
    require_https: bool
    suspend_after_failures: int
    suspend_window_seconds: float
    breaker_error_rate: float
    breaker_min_attempts: int
    breaker_window_seconds: float
    breaker_cooldown_seconds: float
    breaker_ramp_seconds: float
    endpoint_max_in_flight: int
    endpoint_rate_limit: int
    global_rate_limit: int
    defer_seconds: float
    redis_url: str


def health() -> HealthSettings:
    return HealthSettings(
        allowed_networks=tuple(getattr(settings, "WEBHOOKS_ALLOWED_NETWORKS", ())),
        require_https=getattr(settings, "WEBHOOKS_REQUIRE_HTTPS", True),
        suspend_after_failures=getattr(settings, "WEBHOOKS_SUSPEND_AFTER_FAILURES", 20),
        suspend_window_seconds=getattr(settings, "WEBHOOKS_SUSPEND_WINDOW_SECONDS", 3600.0),
        breaker_error_rate=getattr(settings, "WEBHOOKS_BREAKER_ERROR_RATE", 0.5),
        breaker_min_attempts=getattr(settings, "WEBHOOKS_BREAKER_MIN_ATTEMPTS", 10),
        breaker_window_seconds=getattr(settings, "WEBHOOKS_BREAKER_WINDOW_SECONDS", 300.0),
        breaker_cooldown_seconds=getattr(settings, "WEBHOOKS_BREAKER_COOLDOWN_SECONDS", 30.0),
        breaker_ramp_seconds=getattr(settings, "WEBHOOKS_BREAKER_RAMP_SECONDS", 60.0),
        endpoint_max_in_flight=getattr(settings, "WEBHOOKS_ENDPOINT_MAX_IN_FLIGHT", 4),
        endpoint_rate_limit=getattr(settings, "WEBHOOKS_ENDPOINT_RATE_LIMIT", 0),
        global_rate_limit=getattr(settings, "WEBHOOKS_GLOBAL_RATE_LIMIT", 0),
        defer_seconds=getattr(settings, "WEBHOOKS_DEFER_SECONDS", 1.0),
        redis_url=getattr(settings, "WEBHOOKS_HEALTH_REDIS_URL", ""),
    )


def address_policy() -> AddressPolicy:
    """The SSRF guard's policy (a bad CIDR fails loudly: system check `webhooks.E010`)."""
    current = health()
    return AddressPolicy(
        allowed_networks=parse_networks(current.allowed_networks),
        require_https=current.require_https,
    )
