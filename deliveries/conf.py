"""The sending side's settings: the registry (names, defaults, what they do) and typed views
of it. Code reads settings only through this module."""

import functools
from dataclasses import dataclass
from typing import Any

from django.core.signals import setting_changed

from webhooks_core import conf as core_conf
from webhooks_core.conf import Registry, Setting
from webhooks_core.conf import value as core_value
from webhooks_core.egress.ssrf import AddressPolicy, parse_networks

SETTINGS: tuple[Setting, ...] = (
    Setting(
        "WEBHOOKS_LEASE_SECONDS",
        30.0,
        "An endpoint's owner (the one worker sending its requests) holds its lease this long, "
        "renewed every third of it while it works; the rows it is sending share the lease. "
        "A worker that dies costs at most this long before another takes the endpoint over.",
    ),
    Setting(
        "WEBHOOKS_DELIVERY_CLAIM_SIZE",
        50,
        "The most deliveries an owner claims at once (it claims no more than it has free "
        "lanes: its endpoint's in-flight limit).",
    ),
    Setting(
        "WEBHOOKS_DELIVERY_TURN_SECONDS",
        5.0,
        "An owner's turn: after this long, if another task message waits for a slot of "
        "the worker's pool (or the pool cannot tell: prefork), it finishes its requests "
        "and hands its endpoint on (a new task message, behind the others), so endpoints "
        "take turns when the pool is smaller than the number of busy endpoints; else the "
        "turn goes on, for 120 s at most.",
    ),
    Setting(
        "WEBHOOKS_DELIVERY_MAX_OPEN_REQUESTS",
        0,
        "Requests open at once in one delivery process, shared by the owners that have "
        "work: owners that find them taken wait in one line, first come first served, "
        "nobody past it, each served its free lanes' worth at once. 0: the concurrency of "
        "the `celery worker` pool the process runs, as the worker resolved it (the CPU count "
        "without `--concurrency`; with `--autoscale`, its maximum; each prefork child has the "
        "whole cap); 1000 in a process that is no `celery worker` (`manage.py serve`, a "
        "shell).",
    ),
    Setting(
        "WEBHOOKS_FANOUT_GRACE_SECONDS",
        30.0,
        "An event not fanned out after this long is fanned out by the sweeper.",
    ),
    Setting(
        "WEBHOOKS_INLINE_FAN_OUT_MAX_ENDPOINTS",
        10,
        "An event whose tenant has at most this many endpoints is fanned out by the emitting "
        "process right after its transaction commits, without a fan-out task (the first 20 "
        "events of a transaction; the rest, and events with an ordering key, go to the "
        "fan-out task). Nothing of it runs inside the product's transaction. 0: always "
        "through the fan-out task.",
    ),
    Setting(
        "WEBHOOKS_REQUEUE_GRACE_SECONDS",
        120.0,
        "An endpoint with due deliveries, no live owner and a wake message out for this long "
        "gets another message from the sweeper (the first may be lost).",
    ),
    Setting(
        "WEBHOOKS_REPLAY_BATCH_SIZE",
        500,
        "Events per replay batch (one task, one transaction each).",
    ),
    Setting(
        "WEBHOOKS_REQUIRE_DECLARED_TYPES",
        True,
        "`emit` and the API refuse event types not declared in the catalogue, and endpoint "
        "filters that match none. Off: undeclared types pass unchecked (declared ones are "
        "still validated).",
    ),
    Setting(
        "WEBHOOKS_CLOUDEVENTS_SOURCE",
        "/webhooks",
        "The CloudEvents `source` attribute (a URI-reference naming this sender) of endpoints "
        "whose `envelope` is `cloudevents`.",
    ),
    Setting(
        "WEBHOOKS_EVENT_TYPE_MODULES",
        (),
        "Modules imported at start-up to declare event types, besides every installed app's "
        "`webhook_events` module.",
    ),
    Setting(
        "WEBHOOKS_EVENT_RETENTION_DAYS",
        30,
        "Events (with their deliveries and attempts) are deleted after this, once every "
        "delivery is final.",
    ),
    Setting(
        "WEBHOOKS_ATTEMPT_RETENTION_DAYS",
        30,
        "Attempt rows are deleted after this (may be shorter than the events').",
    ),
    Setting(
        "WEBHOOKS_PURGE_BATCH_SIZE",
        1000,
        "Rows per retention batch (one short transaction each).",
    ),
    Setting(
        "WEBHOOKS_PURGE_INTERVAL_SECONDS",
        600.0,
        "How often beat runs the retention purge.",
    ),
    Setting(
        "WEBHOOKS_PAYLOAD_OFFLOAD_BYTES",
        65536,
        "Event data whose compact JSON is larger than this is written through Django's "
        "storage API; the row keeps a reference and its SHA-256. 0 = always inline.",
    ),
    Setting(
        "WEBHOOKS_RESPONSE_BODY_LIMIT_BYTES",
        2048,
        "How much of an endpoint's answer each attempt keeps (the response excerpt of the "
        "delivery log, the API and the admin; a broker's answer too); the rest is not "
        "stored. 0: no excerpt is kept.",
    ),
    Setting(
        "WEBHOOKS_PAYLOAD_STORAGE",
        "default",
        "Key of Django's `STORAGES` that large payloads go to.",
    ),
    Setting(
        "WEBHOOKS_PORTAL_TENANT_RESOLVER",
        "",
        "Dotted path of a callable `request -> tenant id or None`: the host's own login "
        "opens the tenants' portal (besides one-time links). Checked at start-up "
        "(`webhooks.E040`).",
    ),
    Setting(
        "WEBHOOKS_PORTAL_BASE_URL",
        "",
        "Scheme and host that the links of `POST /api/v1/portal-sessions` start with "
        "(e.g. `https://app.example.com`); empty: the host the API request came to.",
    ),
    Setting(
        "WEBHOOKS_PORTAL_ALLOWED_NETWORKS",
        (),
        "CIDR networks that endpoints a tenant makes or re-points in the portal may reach "
        "besides public addresses. `WEBHOOKS_ALLOWED_NETWORKS` and DEBUG's loopback "
        "allowance never apply to those endpoints (only to the ones operators and the API "
        "make): list a network here to let tenants reach it too. Empty: public addresses "
        "only, in DEBUG too.",
    ),
    Setting(
        "WEBHOOKS_SUSPEND_AFTER_FAILURES",
        20,
        "Auto-suspend an endpoint after this many failed attempts in a row (per endpoint: "
        "`suspend_after_failures`; 0 = never).",
    ),
    Setting(
        "WEBHOOKS_SUSPEND_WINDOW_SECONDS",
        3600.0,
        "... that span at least this long (per endpoint: `suspend_window_seconds`).",
    ),
    Setting(
        "WEBHOOKS_BREAKER_ERROR_RATE",
        0.5,
        "The circuit opens when at least this share of the attempts in the window failed ...",
    ),
    Setting(
        "WEBHOOKS_BREAKER_MIN_ATTEMPTS",
        10,
        "... out of at least this many attempts ...",
    ),
    Setting(
        "WEBHOOKS_BREAKER_WINDOW_SECONDS",
        300.0,
        "... within this window.",
    ),
    Setting(
        "WEBHOOKS_BREAKER_COOLDOWN_SECONDS",
        30.0,
        "An open circuit lets one probe through after this cool-down.",
    ),
    Setting(
        "WEBHOOKS_BREAKER_RAMP_SECONDS",
        60.0,
        "After a good probe, traffic ramps from 10 % to 100 % over this long.",
    ),
    Setting(
        "WEBHOOKS_ENDPOINT_MAX_IN_FLIGHT",
        4,
        "Requests in flight per endpoint across all workers (per endpoint: `max_in_flight`).",
    ),
    Setting(
        "WEBHOOKS_ENDPOINT_RATE_LIMIT",
        0,
        "Requests per second per endpoint (per endpoint: `rate_limit_per_second`); 0 = no limit.",
    ),
    Setting(
        "WEBHOOKS_GLOBAL_RATE_LIMIT",
        0,
        "Requests per second to all endpoints together; 0 = no limit.",
    ),
    Setting(
        "WEBHOOKS_DEFER_SECONDS",
        1.0,
        "How long an endpoint's other due deliveries wait after a request got no answer at all "
        "(at least as long as such a request takes), without spending an attempt.",
    ),
    Setting(
        "WEBHOOKS_EGRESS_PROXY_URL",
        "",
        "A forward proxy every HTTP delivery and OAuth2 token request goes through "
        "(http://[user:password@]host:port; CONNECT for https, absolute form for http), so "
        "endpoints' servers can allow-list its one address. The SSRF guard still checks "
        "each target before the proxy is asked (docs: delivery-auth/egress-proxy). Empty: direct.",
    ),
    Setting(
        "WEBHOOKS_VALIDATION_ORIGIN",
        "",
        "Our origin in the CloudEvents webhook handshake (`WebHook-Request-Origin`, on the "
        "`OPTIONS` request and on every delivery to an endpoint whose `validation` is "
        "`cloudevents`), e.g. `hooks.example.com`. Empty: the first of `ALLOWED_HOSTS` that "
        "names one host (not `*`, not `.example.com`). Never empty while the handshake may "
        "be used (system check `webhooks.E030`).",
    ),
    Setting(
        "WEBHOOKS_PORTAL_ENDPOINT_VALIDATION",
        "none",
        "The `validation` of endpoints a tenant makes in the portal: `none` or `cloudevents` "
        "(the target must consent through the CloudEvents handshake before anything is sent "
        "to it).",
    ),
    Setting(
        "WEBHOOKS_VALIDATION_RETRY_SECONDS",
        30.0,
        "A handshake the target did not answer (down, timeout, 5xx, 429) is tried again "
        "after this, doubling each time up to `WEBHOOKS_VALIDATION_RETRY_MAX_SECONDS`; after "
        "10 unanswered tries the endpoint is `refused` until someone asks again.",
    ),
    Setting(
        "WEBHOOKS_VALIDATION_RETRY_MAX_SECONDS",
        3600.0,
        "The longest wait between two automatic handshakes of one endpoint.",
    ),
    Setting(
        "WEBHOOKS_VALIDATION_MIN_INTERVAL_SECONDS",
        30.0,
        "The shortest time between two handshakes someone asks for on one endpoint (`POST "
        "/api/v1/endpoints/{id}/validate`, the portal's button, the admin's action): asked "
        "again sooner, the request is folded into the one pending (202) or refused with "
        "`Retry-After` (429), so the button is no way to make us send `OPTIONS` requests "
        "at will. At least 1.",
    ),
    Setting(
        "WEBHOOKS_HEALTH_REDIS_URL",
        "",
        "Redis for the shared counters (wake messages, rate limits, breaker). Empty: the "
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
    response_body_limit: int
    claim_size: int = 50
    inline_fan_out_max_endpoints: int = 10
    turn_seconds: float = 5.0
    max_open_requests: int = 0
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
    cloudevents_source: str = "/webhooks"
    egress_proxy_url: str = ""


@functools.cache
def get() -> DeliverySettings:
    return DeliverySettings(
        max_countdown_seconds=core_value("WEBHOOKS_MAX_COUNTDOWN_SECONDS"),
        lease_seconds=value("WEBHOOKS_LEASE_SECONDS"),
        fanout_grace_seconds=value("WEBHOOKS_FANOUT_GRACE_SECONDS"),
        requeue_grace_seconds=value("WEBHOOKS_REQUEUE_GRACE_SECONDS"),
        sweep_batch_size=core_value("WEBHOOKS_SWEEP_BATCH_SIZE"),
        response_body_limit=max(0, int(value("WEBHOOKS_RESPONSE_BODY_LIMIT_BYTES"))),
        claim_size=value("WEBHOOKS_DELIVERY_CLAIM_SIZE"),
        inline_fan_out_max_endpoints=int(value("WEBHOOKS_INLINE_FAN_OUT_MAX_ENDPOINTS")),
        turn_seconds=value("WEBHOOKS_DELIVERY_TURN_SECONDS"),
        max_open_requests=int(value("WEBHOOKS_DELIVERY_MAX_OPEN_REQUESTS")),
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
        cloudevents_source=value("WEBHOOKS_CLOUDEVENTS_SOURCE"),
        egress_proxy_url=value("WEBHOOKS_EGRESS_PROXY_URL") or "",
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
    portal_allowed_networks: tuple[str, ...] = ()


@functools.cache
def health() -> HealthSettings:
    return HealthSettings(
        allowed_networks=tuple(core_value("WEBHOOKS_ALLOWED_NETWORKS")),
        portal_allowed_networks=tuple(value("WEBHOOKS_PORTAL_ALLOWED_NETWORKS")),
        require_https=core_value("WEBHOOKS_REQUIRE_HTTPS"),
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
    """The SSRF guard's policy for operators' endpoints (``webhooks_core.conf``)."""
    return core_conf.address_policy()


@functools.cache
def portal_address_policy() -> AddressPolicy:
    """The SSRF guard's policy for endpoints whose URL a tenant chose in the portal: public
    addresses, plus ``WEBHOOKS_PORTAL_ALLOWED_NETWORKS`` only (never the operators'
    ``WEBHOOKS_ALLOWED_NETWORKS`` nor DEBUG's loopback)."""
    current = health()
    return AddressPolicy(
        allowed_networks=parse_networks(current.portal_allowed_networks),
        require_https=current.require_https,
        allowance_setting="",
    )


def endpoint_address_policy(endpoint: Any) -> AddressPolicy:
    """The policy an endpoint's requests go out under, at connect time as when saved:
    `portal_address_policy` when a tenant chose its URL (its portal session or an API
    token limited to it, `endpoints.principals`)."""
    if getattr(endpoint, "url_chosen_in_portal", False):
        return portal_address_policy()
    return address_policy()


def token_url_policy(endpoint: Any) -> AddressPolicy:
    """The policy an endpoint's OAuth2 token requests go out under: the tenant's when a
    tenant chose the token URL, whoever chose the endpoint's URL."""
    if getattr(endpoint, "token_url_chosen_by_tenant", False):
        return portal_address_policy()
    return endpoint_address_policy(endpoint)


@dataclass(frozen=True)
class ValidationSettings:
    """The CloudEvents webhook handshake (deliveries/endpoints/validation_rules.py)."""

    #: Our WebHook-Request-Origin; "" when it cannot be determined.
    origin: str
    portal_default: str
    retry_seconds: float
    retry_max_seconds: float
    min_interval_seconds: float


def validation() -> ValidationSettings:
    from django.conf import settings

    from deliveries.endpoints.validation_rules import origin_from

    return ValidationSettings(
        origin=origin_from(
            str(value("WEBHOOKS_VALIDATION_ORIGIN") or ""), getattr(settings, "ALLOWED_HOSTS", [])
        ),
        portal_default=str(value("WEBHOOKS_PORTAL_ENDPOINT_VALIDATION") or "none"),
        retry_seconds=float(value("WEBHOOKS_VALIDATION_RETRY_SECONDS")),
        retry_max_seconds=float(value("WEBHOOKS_VALIDATION_RETRY_MAX_SECONDS")),
        min_interval_seconds=max(1.0, float(value("WEBHOOKS_VALIDATION_MIN_INTERVAL_SECONDS"))),
    )


@dataclass(frozen=True)
class PortalSettings:
    """The tenants' portal (deliveries/portal/)."""

    #: Dotted path of a callable ``request -> tenant id or None``: the host's own login
    #: decides whose portal a request sees. Empty: only one-time links open the portal.
    tenant_resolver: str
    #: Scheme and host the links of ``POST /api/v1/portal-sessions`` start with (e.g.
    #: "https://app.example.com"); empty: the host the API request came to.
    base_url: str


def portal() -> PortalSettings:
    return PortalSettings(
        tenant_resolver=value("WEBHOOKS_PORTAL_TENANT_RESOLVER") or "",
        base_url=value("WEBHOOKS_PORTAL_BASE_URL") or "",
    )


def _forget(**kwargs: Any) -> None:
    """Settings are read once per process (every delivery reads them several times);
    a changed setting (tests, `override_settings`) is read again."""
    for view in (get, health, portal_address_policy):
        view.cache_clear()


setting_changed.connect(_forget, dispatch_uid="deliveries.conf")
