"""The sending side's settings: the registry entries (names, defaults, what they do), each
declared once on the typed view of its concern, and the SSRF guard's policies derived from
them. Code reads settings only through this module (``webhooks_core.conf`` holds those
shared with the receiving side: countdowns, sweeps, the operators' SSRF allowance)."""

from typing import Any

from django.conf import settings

from webhooks_core import conf as core_conf
from webhooks_core.conf import Setting, View, accessor, per_process, settings_of
from webhooks_core.egress.ssrf import AddressPolicy, parse_networks


def _origin(raw: Any) -> str:
    """Our WebHook-Request-Origin: the setting, else one of ``ALLOWED_HOSTS``; "" when it
    cannot be determined."""
    from deliveries.endpoints.validation_rules import origin_from

    return origin_from("" if raw is None else str(raw), getattr(settings, "ALLOWED_HOSTS", []))


def _redis_url(raw: Any) -> str:
    # The shared counters live beside the broker when it is Redis; otherwise (the embedded
    # memory:// broker: one process) they stay in process memory.
    if raw:
        return str(raw)
    from celery import current_app

    url = str(current_app.conf.broker_url or "")
    return url if url.startswith(("redis://", "rediss://")) else ""


class DeliverySettings(View):
    """The sending pipeline: owners, fan-out, sweeps, replays, retention, payloads."""

    lease_seconds = Setting(
        "WEBHOOKS_LEASE_SECONDS",
        30.0,
        "An endpoint's owner (the one worker sending its requests) holds its lease this long, "
        "renewed every third of it while it works; the rows it is sending share the lease. "
        "A worker that dies costs at most this long before another takes the endpoint over.",
    )
    claim_size = Setting(
        "WEBHOOKS_DELIVERY_CLAIM_SIZE",
        50,
        "The most deliveries an owner claims at once (it claims no more than it has free "
        "lanes: its endpoint's in-flight limit).",
    )
    turn_seconds = Setting(
        "WEBHOOKS_DELIVERY_TURN_SECONDS",
        5.0,
        "An owner's turn: after this long, if another task message waits for a slot of "
        "the worker's pool (or the pool cannot tell: prefork), it finishes its requests "
        "and hands its endpoint on (a new task message, behind the others), so endpoints "
        "take turns when the pool is smaller than the number of busy endpoints; else the "
        "turn goes on, for 120 s at most.",
    )
    max_open_requests = Setting(
        "WEBHOOKS_DELIVERY_MAX_OPEN_REQUESTS",
        0,
        "Requests open at once in one delivery process, shared by the owners that have "
        "work: owners that find them taken wait in one line, first come first served, "
        "nobody past it, each served its free lanes' worth at once. 0: the concurrency of "
        "the `celery worker` pool the process runs, as the worker resolved it (the CPU count "
        "without `--concurrency`; with `--autoscale`, its maximum; each prefork child has the "
        "whole cap); 1000 in a process that is no `celery worker` (`manage.py serve`, a "
        "shell).",
        parse=int,
    )
    fanout_grace_seconds = Setting(
        "WEBHOOKS_FANOUT_GRACE_SECONDS",
        30.0,
        "An event not fanned out after this long is fanned out by the sweeper.",
    )
    inline_fan_out_max_endpoints = Setting(
        "WEBHOOKS_INLINE_FAN_OUT_MAX_ENDPOINTS",
        5,
        "An event whose tenant has at most this many endpoints is fanned out by the emitting "
        "process right after its transaction commits, without the fan-out task (the first 20 "
        "events of a transaction; the rest, and events with an ordering key, go to the "
        "task): one hop less before the first attempt, paid for by the emitting process "
        "after each commit (a read of the endpoints, a short transaction, the wakes), which "
        "grows with the endpoints. Other events cost the emitting process one Redis round "
        "trip: the fan-out task takes the events of many commits in one transaction. 0: "
        "always the fan-out task.",
        parse=int,
    )
    ordering_fan_out_wait_seconds = Setting(
        "WEBHOOKS_ORDERING_FAN_OUT_WAIT_SECONDS",
        300.0,
        "An event with an ordering key is not fanned out (and, on an ordered endpoint, not "
        "sent) while an earlier event of its key and tenant waits for its own fan-out, for at "
        "most this long after that earlier event was created: one whose fan-out keeps "
        "failing then no longer holds its key back (the later events go without it; it "
        "follows if its fan-out ever succeeds).",
    )
    wake_grace_seconds = Setting(
        "WEBHOOKS_WAKE_GRACE_SECONDS",
        120.0,
        "An endpoint with due deliveries, no live owner and a wake message out for this long "
        "gets another message from the sweeper (the first may be lost).",
    )
    replay_batch_size = Setting(
        "WEBHOOKS_REPLAY_BATCH_SIZE",
        500,
        "Events per replay batch (one task, one transaction each).",
        parse=int,
    )
    require_declared_types = Setting(
        "WEBHOOKS_REQUIRE_DECLARED_TYPES",
        True,
        "`emit` and the API refuse event types not declared in the catalogue, and endpoint "
        "filters that match none. Off: undeclared types pass unchecked (declared ones are "
        "still validated).",
    )
    cloudevents_source = Setting(
        "WEBHOOKS_CLOUDEVENTS_SOURCE",
        "/webhooks",
        "The CloudEvents `source` attribute (a URI-reference naming this sender) of endpoints "
        "whose `envelope` is `cloudevents`.",
    )
    event_type_modules = Setting[tuple[str, ...]](
        "WEBHOOKS_EVENT_TYPE_MODULES",
        (),
        "Modules imported at start-up to declare event types, besides every installed app's "
        "`webhook_events` module.",
    )
    event_retention_days = Setting(
        "WEBHOOKS_EVENT_RETENTION_DAYS",
        30,
        "Events (with their deliveries and attempts) are deleted after this, once every "
        "delivery is final.",
    )
    attempt_retention_days = Setting(
        "WEBHOOKS_ATTEMPT_RETENTION_DAYS",
        30,
        "Attempt rows are deleted after this (may be shorter than the events').",
    )
    purge_batch_size = Setting(
        "WEBHOOKS_PURGE_BATCH_SIZE",
        1000,
        "Rows per retention batch (one short transaction each).",
    )
    purge_interval_seconds = Setting(
        "WEBHOOKS_PURGE_INTERVAL_SECONDS",
        600.0,
        "How often beat runs the retention purge.",
    )
    payload_offload_bytes = Setting(
        "WEBHOOKS_PAYLOAD_OFFLOAD_BYTES",
        65536,
        "Event data whose compact JSON is larger than this is written through Django's "
        "storage API; the row keeps a reference and its SHA-256. 0 = always inline.",
        parse=int,
    )
    response_body_limit = Setting(
        "WEBHOOKS_RESPONSE_BODY_LIMIT_BYTES",
        2048,
        "How much of an endpoint's answer each attempt keeps (the response excerpt of the "
        "delivery log, the API and the admin; a broker's answer too); the rest is not "
        "stored. 0: no excerpt is kept.",
        parse=int,
        minimum=0,
    )
    payload_storage = Setting(
        "WEBHOOKS_PAYLOAD_STORAGE",
        "default",
        "Key of Django's `STORAGES` that large payloads go to.",
    )


class PortalSettings(View):
    """The tenants' portal (deliveries/portal/) and where its endpoints may point."""

    tenant_resolver = Setting(
        "WEBHOOKS_PORTAL_TENANT_RESOLVER",
        "",
        "Dotted path of a callable `request -> tenant id or None`: the host's own login "
        "opens the tenants' portal (besides one-time links). Checked at start-up "
        "(`webhooks.E040`).",
    )
    base_url = Setting(
        "WEBHOOKS_PORTAL_BASE_URL",
        "",
        "Scheme and host that the links of `POST /api/v1/portal-sessions` start with "
        "(e.g. `https://app.example.com`); empty: the host the API request came to.",
    )
    allowed_networks = Setting[tuple[str, ...]](
        "WEBHOOKS_PORTAL_ALLOWED_NETWORKS",
        (),
        "CIDR networks that endpoints a tenant makes or re-points in the portal may reach "
        "besides public addresses. `WEBHOOKS_ALLOWED_NETWORKS` and DEBUG's loopback "
        "allowance never apply to those endpoints (only to the ones operators and the API "
        "make): list a network here to let tenants reach it too. Empty: public addresses "
        "only, in DEBUG too.",
    )


class HealthSettings(View):
    """Endpoint health and isolation: auto-suspension, the breaker, in-flight and rate limits."""

    suspend_after_failures = Setting(
        "WEBHOOKS_SUSPEND_AFTER_FAILURES",
        20,
        "Auto-suspend an endpoint after this many failed attempts in a row (per endpoint: "
        "`suspend_after_failures`; 0 = never).",
    )
    suspend_window_seconds = Setting(
        "WEBHOOKS_SUSPEND_WINDOW_SECONDS",
        3600.0,
        "... that span at least this long (per endpoint: `suspend_window_seconds`).",
    )
    breaker_error_rate = Setting(
        "WEBHOOKS_BREAKER_ERROR_RATE",
        0.5,
        "The circuit opens when at least this share of the attempts in the window failed ...",
    )
    breaker_min_attempts = Setting(
        "WEBHOOKS_BREAKER_MIN_ATTEMPTS",
        10,
        "... out of at least this many attempts ...",
    )
    breaker_window_seconds = Setting(
        "WEBHOOKS_BREAKER_WINDOW_SECONDS",
        300.0,
        "... within this window.",
    )
    breaker_cooldown_seconds = Setting(
        "WEBHOOKS_BREAKER_COOLDOWN_SECONDS",
        30.0,
        "An open circuit lets one probe through after this cool-down.",
    )
    breaker_ramp_seconds = Setting(
        "WEBHOOKS_BREAKER_RAMP_SECONDS",
        60.0,
        "After a good probe, traffic ramps from 10 % to 100 % over this long.",
    )
    endpoint_max_in_flight = Setting(
        "WEBHOOKS_ENDPOINT_MAX_IN_FLIGHT",
        4,
        "Requests in flight per endpoint across all workers (per endpoint: `max_in_flight`).",
    )
    endpoint_rate_limit = Setting(
        "WEBHOOKS_ENDPOINT_RATE_LIMIT",
        0,
        "Requests per second per endpoint (per endpoint: `rate_limit_per_second`); 0 = no limit.",
    )
    global_rate_limit = Setting(
        "WEBHOOKS_GLOBAL_RATE_LIMIT",
        0,
        "Requests per second to all endpoints together; 0 = no limit.",
    )
    defer_seconds = Setting(
        "WEBHOOKS_DEFER_SECONDS",
        1.0,
        "How long an endpoint's other due deliveries wait after a request got no answer at all "
        "(at least as long as such a request takes), without spending an attempt.",
    )


class EgressSettings(View):
    """How requests to endpoints and token URLs leave (the SSRF guard's policies are below)."""

    proxy_url = Setting(
        "WEBHOOKS_EGRESS_PROXY_URL",
        "",
        "A forward proxy every HTTP delivery and OAuth2 token request goes through "
        "(http://[user:password@]host:port; CONNECT for https, absolute form for http), so "
        "endpoints' servers can allow-list its one address. The SSRF guard still checks "
        "each target before the proxy is asked (docs: delivery-auth/egress-proxy). Empty: direct.",
    )


class ValidationSettings(View):
    """The CloudEvents webhook handshake (deliveries/endpoints/validation_rules.py)."""

    origin = Setting(
        "WEBHOOKS_VALIDATION_ORIGIN",
        "",
        "Our origin in the CloudEvents webhook handshake (`WebHook-Request-Origin`, on the "
        "`OPTIONS` request and on every delivery to an endpoint whose `validation` is "
        "`cloudevents`), e.g. `hooks.example.com`. Empty: the first of `ALLOWED_HOSTS` that "
        "names one host (not `*`, not `.example.com`). Never empty while the handshake may "
        "be used (system check `webhooks.E030`).",
        parse=_origin,
    )
    portal_default = Setting(
        "WEBHOOKS_PORTAL_ENDPOINT_VALIDATION",
        "none",
        "The `validation` of endpoints a tenant makes in the portal: `none` or `cloudevents` "
        "(the target must consent through the CloudEvents handshake before anything is sent "
        "to it).",
    )
    retry_seconds = Setting(
        "WEBHOOKS_VALIDATION_RETRY_SECONDS",
        30.0,
        "A handshake the target did not answer (down, timeout, 5xx, 429) is tried again "
        "after this, doubling each time up to `WEBHOOKS_VALIDATION_RETRY_MAX_SECONDS`; after "
        "10 unanswered tries the endpoint is `refused` until someone asks again.",
    )
    retry_max_seconds = Setting(
        "WEBHOOKS_VALIDATION_RETRY_MAX_SECONDS",
        3600.0,
        "The longest wait between two automatic handshakes of one endpoint.",
    )
    min_interval_seconds = Setting(
        "WEBHOOKS_VALIDATION_MIN_INTERVAL_SECONDS",
        30.0,
        "The shortest time between two handshakes someone asks for on one endpoint (`POST "
        "/api/v1/endpoints/{id}/validate`, the portal's button, the admin's action): asked "
        "again sooner, the request is folded into the one pending (202) or refused with "
        "`Retry-After` (429), so the button is no way to make us send `OPTIONS` requests "
        "at will. At least 1.",
        minimum=1.0,
    )


class PollSettings(View):
    """Pull delivery: how many long polls a web process holds, and how it re-reads."""

    max_waits_per_key = Setting(
        "WEBHOOKS_POLL_MAX_WAITS_PER_KEY",
        10,
        "Long polls (`wait` > 0 on `GET /api/v1/poll/...`) one consumer key may hold open at "
        "once in one web process; one more is answered 429 with `Retry-After`.",
        minimum=1,
    )
    max_waits_per_process = Setting(
        "WEBHOOKS_POLL_MAX_WAITS_PER_PROCESS",
        1000,
        "Long polls one web process holds open at once, all keys together; one more is "
        "answered 429 with `Retry-After`. A waiting long poll holds no database connection "
        "(under the `web` process's gevent workers, no thread either).",
        minimum=1,
    )
    recheck_seconds = Setting(
        "WEBHOOKS_POLL_RECHECK_SECONDS",
        0.5,
        "How often a waiting long poll reads its feed again when no notice can reach it "
        "(no Redis: the embedded default); with Redis, fan-out's notice wakes it and it "
        "reads again every 5 s at most besides.",
        minimum=0.05,
    )


class CountersSettings(View):
    """Where the shared counters live (wake messages, rate limits, breaker, OAuth2 tokens)."""

    redis_url = Setting(
        "WEBHOOKS_HEALTH_REDIS_URL",
        "",
        "Redis for the shared counters (wake messages, rate limits, breaker, OAuth2 tokens) "
        "and the long polls' notices. Empty: the Celery broker's Redis, or process memory "
        "when the broker is not Redis.",
        parse=_redis_url,
    )


get = accessor(DeliverySettings)
portal = accessor(PortalSettings)
health = accessor(HealthSettings)
egress = accessor(EgressSettings)
validation = accessor(ValidationSettings)
counters = accessor(CountersSettings)
poll = accessor(PollSettings)

SETTINGS = settings_of(
    DeliverySettings,
    PortalSettings,
    HealthSettings,
    EgressSettings,
    ValidationSettings,
    CountersSettings,
    PollSettings,
)


def address_policy() -> AddressPolicy:
    """The SSRF guard's policy for operators' endpoints (``webhooks_core.conf``)."""
    return core_conf.address_policy()


@per_process
def portal_address_policy() -> AddressPolicy:
    """The SSRF guard's policy for endpoints whose URL a tenant chose in the portal: public
    addresses, plus ``WEBHOOKS_PORTAL_ALLOWED_NETWORKS`` only (never the operators'
    ``WEBHOOKS_ALLOWED_NETWORKS`` nor DEBUG's loopback)."""
    return AddressPolicy(
        allowed_networks=parse_networks(portal().allowed_networks),
        require_https=core_conf.ssrf().require_https,
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
