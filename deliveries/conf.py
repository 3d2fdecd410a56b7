"""The sending side's settings: the registry (names, defaults, what they do) and typed views
of it. Code reads settings only through this module."""

from dataclasses import dataclass

from webhooks_core.conf import Registry, Setting
from webhooks_core.conf import value as core_value

from .ssrf import AddressPolicy, parse_networks

SETTINGS: tuple[Setting, ...] = (
    Setting(
        "WEBHOOKS_LEASE_SECONDS",
        120.0,
        "How long a claimed delivery stays `sending` before the sweeper takes it back.",
    ),
    Setting("WEBHOOKS_DELIVERY_BATCH_SIZE", 50, "Deliveries to one endpoint sent by one task."),
    Setting(
        "WEBHOOKS_DELIVERY_BATCH_SECONDS",
        5.0,
        "Time budget of one delivery batch; what is left goes back to the queue.",
    ),
    Setting(
        "WEBHOOKS_FANOUT_GRACE_SECONDS",
        30.0,
        "Age after which the sweeper fans out an event whose fan-out message was lost.",
    ),
    Setting(
        "WEBHOOKS_REQUEUE_GRACE_SECONDS",
        120.0,
        "Age after which the sweeper re-sends the message of a due delivery.",
    ),
    Setting("WEBHOOKS_REPLAY_BATCH_SIZE", 500, "Events one replay step re-sends."),
    Setting(
        "WEBHOOKS_REQUIRE_DECLARED_TYPES",
        True,
        "`emit()` refuses event types no `webhook_events` module declared.",
    ),
    Setting(
        "WEBHOOKS_EVENT_TYPE_MODULES",
        (),
        "Modules declaring event types, besides every installed app's `webhook_events`.",
    ),
    Setting("WEBHOOKS_EVENT_RETENTION_DAYS", 30, "Days events are kept before the purge."),
    Setting("WEBHOOKS_ATTEMPT_RETENTION_DAYS", 30, "Days delivery attempts are kept."),
    Setting("WEBHOOKS_PURGE_BATCH_SIZE", 1000, "Rows the purge deletes per transaction."),
    Setting("WEBHOOKS_PURGE_INTERVAL_SECONDS", 600.0, "How often beat runs the purge."),
    Setting(
        "WEBHOOKS_PAYLOAD_OFFLOAD_BYTES",
        65536,
        "Event data larger than this (compact JSON) is stored through Django's storage API.",
    ),
    Setting(
        "WEBHOOKS_PAYLOAD_STORAGE",
        "default",
        "Alias in STORAGES where offloaded event data is written.",
    ),
    Setting(
        "WEBHOOKS_ALLOWED_NETWORKS",
        (),
        "Private networks (CIDRs) endpoints may point at despite the SSRF guard. In DEBUG "
        "loopback is allowed.",
        debug_default=("127.0.0.0/8", "::1"),
    ),
    Setting(
        "WEBHOOKS_REQUIRE_HTTPS",
        True,
        "Endpoints must use https. In DEBUG plain http is allowed.",
        debug_default=False,
    ),
    Setting(
        "WEBHOOKS_SUSPEND_AFTER_FAILURES",
        20,
        "Consecutive failed deliveries after which an endpoint is suspended.",
    ),
    Setting(
        "WEBHOOKS_SUSPEND_WINDOW_SECONDS",
        3600.0,
        "The failures must also span at least this long before suspension.",
    ),
    Setting("WEBHOOKS_BREAKER_ERROR_RATE", 0.5, "Failure ratio that opens an endpoint's circuit."),
    Setting(
        "WEBHOOKS_BREAKER_MIN_ATTEMPTS", 10, "Attempts in the window before the circuit may open."
    ),
    Setting("WEBHOOKS_BREAKER_WINDOW_SECONDS", 300.0, "The circuit breaker's sliding window."),
    Setting(
        "WEBHOOKS_BREAKER_COOLDOWN_SECONDS", 30.0, "How long an open circuit waits for a probe."
    ),
    Setting(
        "WEBHOOKS_BREAKER_RAMP_SECONDS",
        60.0,
        "After closing, traffic to the endpoint ramps up over this long.",
    ),
    Setting(
        "WEBHOOKS_ENDPOINT_MAX_IN_FLIGHT", 4, "Concurrent requests to one endpoint (0: no cap)."
    ),
    Setting(
        "WEBHOOKS_ENDPOINT_RATE_LIMIT", 0, "Requests per second to one endpoint (0: no limit)."
    ),
    Setting("WEBHOOKS_GLOBAL_RATE_LIMIT", 0, "Requests per second to all endpoints (0: no limit)."),
    Setting(
        "WEBHOOKS_DEFER_SECONDS",
        1.0,
        "How long a delivery held back by a cap or limit waits before its next try.",
    ),
    Setting(
        "WEBHOOKS_HEALTH_REDIS_URL",
        "",
        "Redis for the shared counters (in-flight slots, limits, breaker). Empty: the "
        "Celery broker's Redis, or process memory when the broker is not Redis.",
    ),
)

value = Registry(SETTINGS)


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
    sweep_interval_seconds: float = 15.0
    replay_batch_size: int = 500
    event_retention_days: int = 30
    attempt_retention_days: int = 30
    purge_batch_size: int = 1000
    purge_interval_seconds: float = 600.0
    payload_offload_bytes: int = 65536
    payload_storage: str = "default"


def get() -> DeliverySettings:
    return DeliverySettings(
        max_countdown_seconds=core_value("WEBHOOKS_MAX_COUNTDOWN_SECONDS"),
        lease_seconds=value("WEBHOOKS_LEASE_SECONDS"),
        fanout_grace_seconds=value("WEBHOOKS_FANOUT_GRACE_SECONDS"),
        requeue_grace_seconds=value("WEBHOOKS_REQUEUE_GRACE_SECONDS"),
        sweep_batch_size=core_value("WEBHOOKS_SWEEP_BATCH_SIZE"),
        batch_size=value("WEBHOOKS_DELIVERY_BATCH_SIZE"),
        batch_seconds=value("WEBHOOKS_DELIVERY_BATCH_SECONDS"),
        require_declared_types=value("WEBHOOKS_REQUIRE_DECLARED_TYPES"),
        event_type_modules=tuple(value("WEBHOOKS_EVENT_TYPE_MODULES")),
        sweep_interval_seconds=core_value("WEBHOOKS_SWEEP_INTERVAL_SECONDS"),
        replay_batch_size=int(value("WEBHOOKS_REPLAY_BATCH_SIZE")),
        event_retention_days=value("WEBHOOKS_EVENT_RETENTION_DAYS"),
        attempt_retention_days=value("WEBHOOKS_ATTEMPT_RETENTION_DAYS"),
        purge_batch_size=value("WEBHOOKS_PURGE_BATCH_SIZE"),
        purge_interval_seconds=value("WEBHOOKS_PURGE_INTERVAL_SECONDS"),
        payload_offload_bytes=int(value("WEBHOOKS_PAYLOAD_OFFLOAD_BYTES")),
        payload_storage=value("WEBHOOKS_PAYLOAD_STORAGE"),
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
        allowed_networks=tuple(value("WEBHOOKS_ALLOWED_NETWORKS")),
        require_https=value("WEBHOOKS_REQUIRE_HTTPS"),
        suspend_after_failures=value("WEBHOOKS_SUSPEND_AFTER_FAILURES"),
        suspend_window_seconds=value("WEBHOOKS_SUSPEND_WINDOW_SECONDS"),
        breaker_error_rate=value("WEBHOOKS_BREAKER_ERROR_RATE"),
        breaker_min_attempts=value("WEBHOOKS_BREAKER_MIN_ATTEMPTS"),
        breaker_window_seconds=value("WEBHOOKS_BREAKER_WINDOW_SECONDS"),
        breaker_cooldown_seconds=value("WEBHOOKS_BREAKER_COOLDOWN_SECONDS"),
        breaker_ramp_seconds=value("WEBHOOKS_BREAKER_RAMP_SECONDS"),
        endpoint_max_in_flight=value("WEBHOOKS_ENDPOINT_MAX_IN_FLIGHT"),
        endpoint_rate_limit=value("WEBHOOKS_ENDPOINT_RATE_LIMIT"),
        global_rate_limit=value("WEBHOOKS_GLOBAL_RATE_LIMIT"),
        defer_seconds=value("WEBHOOKS_DEFER_SECONDS"),
        redis_url=value("WEBHOOKS_HEALTH_REDIS_URL") or _broker_redis_url(),
    )


def _broker_redis_url() -> str:
    # The shared counters live beside the broker when it is Redis; otherwise (the embedded
    # memory:// broker: one process) they stay in process memory.
    from celery import current_app

    url = str(current_app.conf.broker_url or "")
    return url if url.startswith(("redis://", "rediss://")) else ""


def address_policy() -> AddressPolicy:
    """The SSRF guard's policy (a bad CIDR fails loudly: system check `webhooks.E010`)."""
    current = health()
    return AddressPolicy(
        allowed_networks=parse_networks(current.allowed_networks),
        require_https=current.require_https,
    )
