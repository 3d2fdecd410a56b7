"""Endpoint life cycle: create, update, rotate secrets, suspend."""

from collections.abc import Callable
from datetime import timedelta
from typing import Any, NamedTuple
from uuid import UUID

from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from deliveries import catalogue, conf
from deliveries.destinations import broker_urls
from deliveries.endpoints import field_rules, headers
from deliveries.endpoints.auth import apply as apply_endpoint_auth
from deliveries.endpoints.field_rules import (
    AUTH_FIELDS,
    CREATE_ONLY,
    EDITABLE,
    MAX_FILTERS,
    MODE_FIXED,
    OPTION_FIELDS,
    POLL_HAS_NO_URL,
    TENANT_FIXED,
    URL_MAX_LENGTH,
)
from deliveries.endpoints.options import (
    endpoint_ensure_signing_key,
    normalised_filter,
    options_problems,
)
from deliveries.endpoints.validation import (
    endpoint_validation_reset,
    field_problems,
    portal_default,
)
from deliveries.endpoints.versions import default_pins
from deliveries.models import (
    DeliveryStatus,
    Endpoint,
    EndpointMode,
    EndpointSecret,
    EndpointState,
    StateSetBy,
)
from deliveries.pipeline.event_types import validate_filter
from webhooks_core import tenants
from webhooks_core.crypto import encryption, signing
from webhooks_core.egress import ssrf

DEFAULT_ROTATION_GRACE_SECONDS = 24 * 3600


class EndpointInvalid(ValueError):
    """The endpoint cannot be saved; ``errors`` maps each field to its reasons (safe to show)."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in errors.items()))


class UnsafeEndpointURL(EndpointInvalid, ssrf.UnsafeURL):
    """The SSRF guard refuses the URL (besides, maybe, other problems in ``errors``)."""


@transaction.atomic
def endpoint_create(
    *,
    url: str,
    event_types: list[str],
    # Any: callers pass options as **kwargs; the rules below check the types.
    custom_headers: Any = None,
    secret_headers: Any = None,
    # Any, like the options: callers spread a dict of settings into these keywords.
    chosen_by_tenant: Any = False,
    **fields: Any,
) -> tuple[Endpoint, str]:
    """Create an endpoint with its first signing secret; the secret is returned once.

    Raises `EndpointInvalid` (`UnsafeEndpointURL`, an `ssrf.UnsafeURL`, for a URL the SSRF
    guard refuses) with every field's problems; nothing is written then. ``tenant`` is
    set here once (see `CREATE_ONLY`). ``chosen_by_tenant``: a tenant chose the URL (the
    portal), so the guard admits public addresses and ``WEBHOOKS_PORTAL_ALLOWED_NETWORKS``
    only, now and at every connect (`conf.endpoint_address_policy`).
    """
    unknown = set(fields) - EDITABLE - CREATE_ONLY
    if unknown:
        raise TypeError(f"endpoint_create() got unexpected fields {sorted(unknown)}")
    auth = _pop_auth(fields)
    mode = fields.setdefault("mode", EndpointMode.PUSH)
    polled = _polled(mode, url)
    if chosen_by_tenant is True and "validation" not in fields and _is_http(url):
        # WEBHOOKS_PORTAL_ENDPOINT_VALIDATION: a tenant's targets may have to consent.
        fields["validation"] = portal_default()
    endpoint = Endpoint(url=url, event_types=event_types, **fields)
    endpoint.url_chosen_in_portal = chosen_by_tenant is True
    _apply_and_validate(
        endpoint,
        # A polling endpoint's empty URL is no URL to check.
        changed={"event_types", *fields, *(() if polled else ("url",))},
        custom_headers=custom_headers or {},
        secret_headers=secret_headers,
        previous_url=None,
        auth=auth,
        chosen_by_tenant=chosen_by_tenant is True,
    )
    endpoint.version_pins = default_pins(endpoint.event_types, endpoint.version_pins)
    endpoint.save()
    secret = _add_secret(endpoint)
    endpoint_ensure_signing_key(endpoint=endpoint)
    endpoint_validation_reset(endpoint=endpoint, url_changed=True, validation_changed=True)
    return endpoint, secret


def endpoint_update(
    *, endpoint: Endpoint, chosen_by_tenant: bool = False, **changes: Any
) -> Endpoint:
    """Change an endpoint's settings under the same rules as `endpoint_create`.

    ``custom_headers`` replaces the whole set; a secret header sent back with the masked
    value (`headers.MASK`) keeps its stored value. ``secret_headers``, when given, is the
    full list of names the operator marks secret (credential-like names always are);
    unmarking one needs its value in ``custom_headers`` (a stored secret value is never
    shown in clear, not even by moving it out of the secret set).
    A change of the URL's origin (scheme, host or port) drops every stored secret header
    unless ``custom_headers`` gives its value again: a credential given for one host is
    never sent to another. The returned endpoint's ``notices`` says what was dropped; a
    masked value sent back across such a change is refused.
    A ``state`` goes through `endpoint_set_state` (it holds or releases deliveries).
    ``chosen_by_tenant``: see `endpoint_create` (it applies when ``url`` is changed).
    Host names (the URL's, a token URL's) resolve first, outside any transaction; the row
    is then locked FOR NO KEY UPDATE (which no new delivery's foreign-key check waits for)
    only while the change is checked again with those answers and written.
    Raises `EndpointInvalid`; nothing is written then.
    """
    for _ in range(UPDATE_TRIES):
        with ssrf.resolved_once() as answers:
            _changed(endpoint.pk, chosen_by_tenant, changes, lock=False)
        answers.only_kept = True
        try:
            with ssrf.resolved_once(answers), transaction.atomic():
                return _write_change(_changed(endpoint.pk, chosen_by_tenant, changes, lock=True))
        except ssrf.NotResolvedHere:
            continue  # changed meanwhile, naming a host not resolved yet: resolve it first
    raise EndpointInvalid({"url": ["The endpoint changed meanwhile; try again."]})


# How often `endpoint_update` resolves again when the row changed under it to name a host
# it had not resolved.
UPDATE_TRIES = 3


class _Change(NamedTuple):
    endpoint: Endpoint
    changed: set[str]
    notices: list[str]
    previous_url: str
    previous_validation: str
    state: str | None


def _changed(
    endpoint_id: UUID, chosen_by_tenant: bool, given: dict[str, Any], *, lock: bool
) -> _Change:
    """The endpoint with the change applied and checked (unsaved); locked with `lock`."""
    changes = dict(given)
    state = changes.pop("state", None)
    rows = Endpoint.objects.select_for_update(no_key=True) if lock else Endpoint.objects
    endpoint = rows.get(pk=endpoint_id)
    tenant = changes.pop("tenant", endpoint.tenant)
    mode = changes.pop("mode", endpoint.mode)
    unknown = set(changes) - EDITABLE
    if unknown:
        raise TypeError(f"endpoint_update() got unexpected fields {sorted(unknown)}")
    if state is not None and state not in EndpointState.values:
        raise EndpointInvalid({"state": [f"{state!r} is not a state."]})
    if tenant != endpoint.tenant:
        raise EndpointInvalid({"tenant": [TENANT_FIXED]})
    if mode != endpoint.mode:
        raise EndpointInvalid({"mode": [MODE_FIXED]})
    given_url = changes.pop("url", "") if endpoint.mode == EndpointMode.POLL else ""
    if given_url:
        raise EndpointInvalid({"url": [POLL_HAS_NO_URL]})
    custom = changes.pop("custom_headers", None)
    marked = changes.pop("secret_headers", None)
    auth = _pop_auth(changes)
    previous_url = endpoint.url
    previous_validation = endpoint.validation
    for name, value in changes.items():
        setattr(endpoint, name, value)
    if "url" in changes:
        endpoint.url_chosen_in_portal = chosen_by_tenant
    notices = _apply_and_validate(
        endpoint,
        changed=set(changes),
        custom_headers=custom,
        secret_headers=marked,
        previous_url=previous_url,
        auth=auth,
        chosen_by_tenant=chosen_by_tenant,
    )
    return _Change(endpoint, set(changes), notices, previous_url, previous_validation, state)


def _write_change(change: _Change) -> Endpoint:
    endpoint, changes = change.endpoint, change.changed
    if "event_types" in changes or "version_pins" in changes:
        endpoint.version_pins = default_pins(endpoint.event_types, endpoint.version_pins)
    endpoint.save()
    if "signature_scheme" in changes:
        endpoint_ensure_signing_key(endpoint=endpoint)
    endpoint_validation_reset(
        endpoint=endpoint,
        url_changed=endpoint.url != change.previous_url,
        validation_changed=endpoint.validation != change.previous_validation,
    )
    state = change.state
    if state and state != endpoint.state:
        endpoint_set_state(endpoint_id=endpoint.pk, state=state)
        endpoint.refresh_from_db()
    endpoint.notices = tuple(change.notices)
    return endpoint


def endpoint_check(
    *, endpoint: Endpoint | None = None, chosen_by_tenant: bool = False, **fields: Any
) -> None:
    """Raise `EndpointInvalid` if `endpoint_create` (no endpoint) or `endpoint_update`
    would refuse these fields; writes nothing. Forms call it to show field errors."""
    fields.pop("state", None)
    editing = endpoint is not None and not endpoint._state.adding
    if (
        editing
        and endpoint
        and "tenant" in fields
        and fields.pop("tenant") != Endpoint.objects.get(pk=endpoint.pk).tenant
    ):
        raise EndpointInvalid({"tenant": [TENANT_FIXED]})
    unknown = set(fields) - EDITABLE - (set() if editing else CREATE_ONLY)
    if unknown:
        raise TypeError(f"endpoint_check() got unexpected fields {sorted(unknown)}")
    candidate = Endpoint.objects.get(pk=endpoint.pk) if editing and endpoint else Endpoint()
    # The same rule as `endpoint_create` and `endpoint_update`: a polling endpoint has no
    # URL to check, and may not be given one.
    polled = _polled(fields.get("mode", candidate.mode), fields.get("url") or "")
    if polled:
        fields.pop("url", None)
    custom = fields.pop("custom_headers", None)
    marked = fields.pop("secret_headers", None)
    auth = _pop_auth(fields)
    previous_url = candidate.url if editing else None
    for name, value in fields.items():
        setattr(candidate, name, value)
    if "url" in fields or not editing:
        candidate.url_chosen_in_portal = chosen_by_tenant
    changed = set(fields) if editing else {"event_types", *fields, *(() if polled else ("url",))}
    _apply_and_validate(
        candidate,
        changed=changed,
        custom_headers=custom,
        secret_headers=marked,
        previous_url=previous_url,
        auth=auth,
        chosen_by_tenant=chosen_by_tenant,
    )


def _polled(mode: str, url: str) -> bool:
    """Whether an endpoint of this ``mode`` is a polling one; raise `EndpointInvalid` for
    an unknown mode, or for a polling endpoint given a URL."""
    if mode not in EndpointMode.values:
        raise EndpointInvalid({"mode": [f"{mode!r} is not a mode: push or poll."]})
    polled = mode == EndpointMode.POLL
    if polled and url:
        raise EndpointInvalid({"url": [POLL_HAS_NO_URL]})
    return polled


def _is_http(url: str) -> bool:
    return url.lower().startswith(("http:", "https:"))


def _pop_auth(fields: dict[str, Any]) -> dict[str, Any]:
    # Not model fields as given (they hold secrets in clear): endpoint_auth applies them.
    return {name: fields.pop(name) for name in AUTH_FIELDS if name in fields}


def _apply_and_validate(
    endpoint: Endpoint,
    *,
    changed: set[str],
    custom_headers: dict[str, str] | None,
    secret_headers: list[str] | None,
    previous_url: str | None,
    auth: dict[str, Any] | None = None,
    chosen_by_tenant: bool = False,
) -> list[str]:
    """Check the changed fields of an unsaved endpoint (and store its headers' values
    encrypted where they are credentials); raise `EndpointInvalid` with every problem.
    Returns the notices of what was done besides the change asked (`endpoint_update`)."""
    errors: dict[str, list[str]] = {}
    notices: list[str] = []

    def refuse(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    if "tenant" in changed:
        problem = tenants.problem(endpoint.tenant)
        if problem:
            refuse("tenant", problem)

    if "url" in changed:
        if not isinstance(endpoint.url, str) or not endpoint.url:
            refuse("url", "Enter a URL.")
        elif len(endpoint.url) > URL_MAX_LENGTH:
            refuse("url", f"The URL is longer than {URL_MAX_LENGTH} characters.")
        else:
            problem = broker_urls.endpoint_url_refusal(
                endpoint.url, conf.endpoint_address_policy(endpoint)
            ) or _apply_url_password(endpoint, previous_url)
            if problem:
                refuse("url", problem)
    if "event_types" in changed:
        patterns = endpoint.event_types
        if not isinstance(patterns, list) or not patterns:
            refuse("event_types", "Give at least one event-type filter.")
        elif len(patterns) > MAX_FILTERS:
            refuse("event_types", f"At most {MAX_FILTERS} filters.")
        else:
            for pattern in patterns:
                problem = (
                    "Each filter must be a text." if not isinstance(pattern, str) else None
                ) or validate_filter(pattern)
                if not problem and conf.get().require_declared_types:
                    problem = catalogue.filter_problem(pattern)
                if problem:
                    refuse("event_types", problem)
            if "event_types" not in errors:
                endpoint.event_types = list(dict.fromkeys(patterns))
    if "version_pins" in changed:
        pins = endpoint.version_pins
        if not isinstance(pins, dict):
            refuse("version_pins", "Give an object {event type: version}.")
        else:
            for name, number in pins.items():
                declared = catalogue.get(name)
                if declared is None:
                    refuse("version_pins", f"{name!r} is not a declared event type.")
                elif not isinstance(number, int) or declared.version(number) is None:
                    refuse(
                        "version_pins",
                        f"{name} has versions 1 to {declared.newest.number}, not {number}.",
                    )
    for rule in field_rules.NUMERIC:
        if rule.name not in changed:
            continue
        value = getattr(endpoint, rule.name)
        if value is None and rule.nullable:
            continue
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        if not numeric or not rule.low <= value <= rule.high:
            refuse(rule.name, rule.refusal)
    if (
        "backoff_base_seconds" not in errors
        and "backoff_max_seconds" not in errors
        and endpoint.backoff_max_seconds < endpoint.backoff_base_seconds
    ):
        refuse("backoff_max_seconds", "Must be at least backoff_base_seconds.")
    moved = (
        previous_url is not None
        and "url" in changed
        and not ssrf.same_origin(previous_url, endpoint.url)
    )
    if custom_headers is not None or secret_headers is not None or moved:
        dropped = _apply_headers(endpoint, custom_headers, secret_headers, refuse, moved=moved)
        if dropped:
            notices.append(
                f"The secret headers {', '.join(dropped)} were removed: the URL now points "
                "at another origin (scheme, host or port), and a credential given for one "
                "host is never sent to another. Give their values again in custom_headers "
                "(in the same change) to keep them."
            )
    if auth or moved:
        notice = apply_endpoint_auth(
            endpoint, auth or {}, refuse, chosen_by_tenant=chosen_by_tenant, moved=moved
        )
        if notice:
            notices.append(notice)
    if (auth or "url" in changed) and endpoint.auth and not _is_http(endpoint.url):
        # A broker destination has its own credentials (in its URL); a token would go nowhere.
        refuse("auth", "OAuth2 delivery auth needs an http(s) URL.")
    options = {name: getattr(endpoint, name) for name in OPTION_FIELDS}
    for field, problems in options_problems(
        {name: value for name, value in options.items() if name in changed}
    ).items():
        errors.setdefault(field, []).extend(problems)
    for field, problems in field_problems(endpoint, changed).items():
        errors.setdefault(field, []).extend(problems)
    if "filter" in changed and "filter" not in errors:
        endpoint.filter = normalised_filter(endpoint.filter)
    if errors:
        raise (UnsafeEndpointURL if "url" in errors else EndpointInvalid)(errors)
    return notices


def _apply_url_password(endpoint: Endpoint, previous_url: str | None) -> str | None:
    """Move a broker URL's password out of `url` into the encrypted `url_password`; the
    masked password sent back (what every read shows) keeps the stored one, on the same
    origin only. Returns why the URL cannot be saved, or None."""
    if not broker_urls.is_broker_url(endpoint.url):
        endpoint.url_password = ""
        return None
    if broker_urls.has_masked_password(endpoint.url):
        stored = "" if endpoint._state.adding else endpoint.url_password
        if not stored or previous_url is None:
            return "The URL's password is the mask (***): give the real password."
        if not ssrf.same_origin(previous_url, endpoint.url) or not _same_user(
            previous_url, endpoint.url
        ):
            return (
                "The URL now points at another broker or user, so its stored password is "
                "not sent there: give the password again."
            )
        return None
    masked, password = broker_urls.split_password(endpoint.url)
    endpoint.url = masked
    endpoint.url_password = encryption.encrypt(password) if password else ""
    return None


def _same_user(before: str, after: str) -> bool:
    from urllib.parse import urlsplit

    return urlsplit(before).username == urlsplit(after).username


def _apply_headers(
    endpoint: Endpoint,
    given: dict[str, str] | None,
    marked: list[str] | None,
    refuse: Callable[[str, str], None],
    *,
    moved: bool = False,
) -> list[str]:
    """Set the endpoint's clear and encrypted headers; returns the names of the secret
    headers dropped because the URL ``moved`` to another origin (`endpoint_update`).

    A stored secret value never reaches a clear field unless this very change gives it:
    not through a masked value sent back while the header is unmarked, not by leaving
    ``custom_headers`` out while ``secret_headers`` unmarks it.
    """
    stored = {} if endpoint._state.adding else endpoint.custom_headers_plain()
    stored_secret = {name.lower() for name in endpoint.secret_custom_headers or {}}
    dropped: list[str] = []
    #: Lower-case names whose value below is the stored one (the caller did not give it).
    from_store: set[str] = set()
    if given is None:
        given = {}
        for name, value in stored.items():
            if moved and name.lower() in stored_secret:
                dropped.append(name)  # not sent to the new origin
                continue
            given[name] = value
            from_store.add(name.lower())
    elif not isinstance(given, dict):
        refuse("custom_headers", "Give an object {header name: value}.")
        return []
    wanted: dict[str, str] = {}
    for name, value in given.items():
        if value == headers.MASK and isinstance(name, str) and name.lower() not in from_store:
            # The masked value a read returned, sent back: keep what is stored.
            keep = next((v for n, v in stored.items() if n.lower() == name.lower()), None)
            if keep is None or name.lower() not in stored_secret:
                refuse("custom_headers", f"{name!r} has no stored secret value to keep.")
                continue
            if moved:
                refuse(
                    "custom_headers",
                    f"{name!r}: the URL now points at another origin (scheme, host or "
                    "port), so its stored value is not sent there. Give the value again, "
                    "or leave the header out.",
                )
                continue
            value = keep
            from_store.add(name.lower())
        wanted[name] = value
    for problem in headers.problems(wanted):
        refuse("custom_headers", problem)
    if marked is None:
        # Keep what the operator marked before (credential-like names are always secret).
        marked_lower = stored_secret
    elif not isinstance(marked, list) or not all(isinstance(n, str) for n in marked):
        refuse("secret_headers", "Give a list of header names.")
        return []
    else:
        marked_lower = {name.lower() for name in marked}
        names = {name.lower() for name in wanted}
        for name in marked:
            if name.lower() not in names:
                refuse("secret_headers", f"{name!r} is not one of the custom headers.")
    for name in wanted:
        lowered = name.lower()
        if (
            lowered in stored_secret
            and lowered in from_store
            and not _is_secret(name, marked_lower)
        ):
            refuse(
                "secret_headers",
                f"{name!r} is a secret header: to unmark it, give its value in custom_headers "
                "in the same change (its stored value is never shown in clear).",
            )
    endpoint.custom_headers = {n: v for n, v in wanted.items() if not _is_secret(n, marked_lower)}
    endpoint.secret_custom_headers = {
        n: encryption.encrypt(v) for n, v in wanted.items() if _is_secret(n, marked_lower)
    }
    return dropped


def _is_secret(name: str, marked_lower: set[str]) -> bool:
    return name.lower() in marked_lower or headers.is_credential(name)


def endpoint_check_url(*, url: str, chosen_by_tenant: bool = False) -> None:
    """Refuse a URL that may not receive webhooks (scheme, private or internal address)."""
    policy = conf.portal_address_policy() if chosen_by_tenant else conf.address_policy()
    problem = broker_urls.endpoint_url_refusal(url, policy)
    if problem:
        raise ssrf.UnsafeURL(problem)


def _add_secret(endpoint: Endpoint) -> str:
    plain = signing.generate_secret()
    secret = EndpointSecret(endpoint=endpoint)
    secret.value = plain
    secret.save()
    return plain


@transaction.atomic
def endpoint_rotate_secret(
    *, endpoint: Endpoint, grace_seconds: int = DEFAULT_ROTATION_GRACE_SECONDS
) -> tuple[str, EndpointSecret]:
    """Add a new secret; the current ones keep signing until the grace period ends.

    Returns the new secret (shown once) and its row. With ``grace_seconds=0`` the old
    secrets stop signing at once.
    """
    now = timezone.now()
    expires_at = now + timedelta(seconds=grace_seconds)
    endpoint.secrets.expire_by(expires_at, now)
    plain = _add_secret(endpoint)
    return plain, endpoint.secrets.order_by("-created_at", "-pk").first()  # type: ignore[return-value]


def endpoint_suspend(*, endpoint_id: UUID, reason: str, by: str = StateSetBy.FAILURES) -> bool:
    """Stop sending to an endpoint; its pending deliveries are held without spending attempts.

    ``by``: who suspends (the failures, unless an operator says so); it decides who may
    resume it (see `endpoint_tenant_may_enable`). Returns False when it was not active.
    """
    now = timezone.now()
    with transaction.atomic():
        changed = Endpoint.objects.filter(pk=endpoint_id, state=EndpointState.ACTIVE).update(
            state=EndpointState.SUSPENDED,
            state_reason=reason[:500],
            state_changed_at=now,
            state_set_by=by,
            test_succeeded_at=None,
        )
        if changed:
            from deliveries.models import Delivery

            Delivery.objects.filter(endpoint_id=endpoint_id, status=DeliveryStatus.PENDING).update(
                status=DeliveryStatus.HELD, updated_at=now
            )
    return bool(changed)


def endpoint_resume(*, endpoint_id: UUID, deliver_backlog: bool = True) -> int:
    """Make a suspended endpoint active again; its held deliveries are sent or cancelled.

    Returns how many held deliveries were released (or cancelled).
    """
    from deliveries.models import Delivery
    from deliveries.pipeline.wake import wake_endpoints

    now = timezone.now()
    with transaction.atomic():
        Endpoint.objects.filter(pk=endpoint_id).exclude(state=EndpointState.ACTIVE).update(
            state=EndpointState.ACTIVE,
            state_reason="",
            state_changed_at=now,
            state_set_by=StateSetBy.NOBODY,
            test_succeeded_at=None,
            consecutive_failures=0,
            failing_since=None,
        )
        held = Delivery.objects.filter(endpoint_id=endpoint_id, status=DeliveryStatus.HELD)
        if not deliver_backlog:
            return held.update(status=DeliveryStatus.CANCELLED, completed_at=now, updated_at=now)
        released = held.update(status=DeliveryStatus.PENDING, next_attempt_at=Now(), updated_at=now)
        transaction.on_commit(lambda: wake_endpoints([endpoint_id]), robust=True)
    return released


def endpoint_set_state(
    *, endpoint_id: UUID, state: str, reason: str = "", by: str = StateSetBy.OPERATOR
) -> None:
    """Move an endpoint to a state with the side effects that state change implies.

    ``by``: who asks, an operator (admin, API) unless said otherwise; the portal goes
    through `endpoint_tenant_disable` and `endpoint_tenant_enable`, which check the rules.
    """
    if state == EndpointState.ACTIVE:
        endpoint_resume(endpoint_id=endpoint_id)
    elif state == EndpointState.SUSPENDED:
        endpoint_suspend(
            endpoint_id=endpoint_id, reason=reason or "suspended by an operator", by=by
        )
    elif state == EndpointState.DISABLED:
        from deliveries.models import Delivery

        now = timezone.now()
        with transaction.atomic():
            Endpoint.objects.filter(pk=endpoint_id).update(
                state=EndpointState.DISABLED,
                state_reason=reason or "disabled by an operator",
                state_changed_at=now,
                state_set_by=by,
                test_succeeded_at=None,
            )
            # A disabled endpoint gets nothing more: what waited for it is cancelled.
            Delivery.objects.filter(
                endpoint_id=endpoint_id,
                status__in=[DeliveryStatus.PENDING, DeliveryStatus.HELD],
            ).update(status=DeliveryStatus.CANCELLED, completed_at=now, updated_at=now)
    else:
        raise ValueError(f"unknown endpoint state {state!r}")


class EndpointNotEnableable(Exception):
    """The endpoint's tenant may not make it active again (see `endpoint_tenant_may_enable`)."""


def endpoint_tenant_may_enable(endpoint: Endpoint) -> bool:
    """Whether the endpoint's tenant may make it active again in the portal.

    Only what the failures suspended, once a test event succeeded since the suspension,
    or what the tenant disabled itself. What an operator suspended or disabled stays so
    until an operator says otherwise.
    """
    if endpoint.state == EndpointState.DISABLED:
        return endpoint.state_set_by == StateSetBy.TENANT
    if endpoint.state == EndpointState.SUSPENDED:
        return (
            endpoint.state_set_by == StateSetBy.FAILURES
            and endpoint.test_succeeded_at is not None
            and (
                endpoint.state_changed_at is None
                or endpoint.test_succeeded_at >= endpoint.state_changed_at
            )
        )
    return False


def endpoint_tenant_enable(*, endpoint_id: UUID) -> None:
    """The tenant makes its endpoint active again; EndpointNotEnableable if it may not."""
    with transaction.atomic():
        endpoint = Endpoint.objects.select_for_update(no_key=True).get(pk=endpoint_id)
        if not endpoint_tenant_may_enable(endpoint):
            raise EndpointNotEnableable(f"endpoint is {endpoint.state} ({endpoint.state_set_by})")
        endpoint_resume(endpoint_id=endpoint_id)


def endpoint_tenant_disable(*, endpoint_id: UUID) -> bool:
    """The tenant stops everything to its active endpoint (and may enable it again).

    Only an active one: disabling a suspended endpoint would turn the operator's or the
    failures' state into the tenant's own, and so skip the rules above. Returns whether
    it was disabled.
    """
    with transaction.atomic():
        endpoint = Endpoint.objects.select_for_update(no_key=True).get(pk=endpoint_id)
        if endpoint.state != EndpointState.ACTIVE:
            return False
        endpoint_set_state(
            endpoint_id=endpoint_id,
            state=EndpointState.DISABLED,
            reason="disabled by its tenant",
            by=StateSetBy.TENANT,
        )
    return True
