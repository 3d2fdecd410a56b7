"""The CloudEvents webhook handshake of an endpoint: asking, recording, waiting.

An endpoint whose ``validation`` is ``cloudevents`` is sent nothing until its target
consented for its current URL (`validation_rules` holds them). The owner asks `ready`
before it claims; an endpoint not ready is left alone (no claim, so no attempt is spent,
and the sweeper does not wake it), and its deliveries stay pending.

When a handshake runs (a Celery task, `HANDSHAKE_TASK`):

- at creation and after every change of the URL or of ``validation`` (state back to
  ``pending``);
- when someone asks again (the admin's action, the portal's button, ``POST
  /api/v1/endpoints/{id}/validate``): `endpoint_request_validation`;
- automatically while ``pending``: a try the target did not answer (down, a timeout, a
  5xx, a 429) is tried again with exponential backoff (WEBHOOKS_VALIDATION_RETRY_SECONDS
  doubling up to WEBHOOKS_VALIDATION_RETRY_MAX_SECONDS); after `validation_rules.MAX_TRIES`
  unanswered tries the endpoint is ``refused``. An answer without consent makes it
  ``refused`` at once and is not asked again by itself: asking a target that said no,
  again and again, is the traffic the handshake exists to prevent.

On consent the state becomes ``validated``, the granted rate is stored, and the endpoint's
owner is woken so the waiting deliveries go at once.
"""

import logging
import math
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from deliveries import conf
from deliveries.destinations.http_client import transport
from deliveries.endpoints import validation_rules
from deliveries.models import Endpoint, EndpointState, Validation, ValidationState
from deliveries.pipeline.messages import VALIDATE_ENDPOINT_TASK, dispatch_task
from deliveries.pipeline.wake import wake_endpoints
from webhooks_core.egress import deadlines

logger = logging.getLogger(__name__)

HANDSHAKE_TASK = VALIDATE_ENDPOINT_TASK
# Handshakes dispatched per periodic look.
DUE_BATCH = 200
# A dispatched handshake's message is taken as lost after this long: the periodic look
# dispatches it again (and never two at once before then).
DISPATCH_LEASE_SECONDS = 60.0


class ValidationUnavailable(Exception):
    """The endpoint does not use the handshake, or our origin is unknown."""


class ValidationFolded(Exception):
    """Asked again within WEBHOOKS_VALIDATION_MIN_INTERVAL_SECONDS: no handshake is sent.

    ``pending``: the handshake asked last has not run yet, so this request is folded
    into it; else it ran, and the caller may ask again in ``retry_after`` seconds."""

    def __init__(self, *, retry_after: int, pending: bool) -> None:
        self.retry_after = retry_after
        self.pending = pending
        super().__init__(
            "a handshake is already on its way"
            if pending
            else f"a handshake was asked for moments ago; ask again in {retry_after} s"
        )


def ready(endpoint: Endpoint) -> bool:
    """Whether the endpoint may be sent to as far as the handshake goes."""
    return endpoint.validation != Validation.CLOUDEVENTS or (
        endpoint.validation_state == ValidationState.VALIDATED
    )


def not_ready() -> Q:
    """Endpoints `ready` says no to, as a filter (the sweeper leaves them alone)."""
    return Q(validation=Validation.CLOUDEVENTS) & ~Q(validation_state=ValidationState.VALIDATED)


def field_problems(endpoint: Endpoint, changed: set[str]) -> dict[str, list[str]]:
    """What is wrong with ``validation`` among the changed fields."""
    if "validation" not in changed and "url" not in changed:
        return {}
    if endpoint.validation not in Validation.values:
        allowed = ", ".join(f'"{v}"' for v in Validation.values)
        return {"validation": [f"Must be one of {allowed}."]}
    if endpoint.validation == Validation.CLOUDEVENTS:
        if not endpoint.url.lower().startswith(("http:", "https:")):
            # The handshake is HTTP's OPTIONS; a broker has its own access control.
            return {"validation": ['"cloudevents" needs an http(s) URL.']}
        problem = validation_rules.origin_problem(conf.validation().origin)
        if problem:
            return {"validation": [f"The CloudEvents handshake is unavailable: {problem}."]}
    return {}


def portal_default() -> str:
    return conf.validation().portal_default


def endpoint_validation_reset(
    *, endpoint: Endpoint, url_changed: bool, validation_changed: bool
) -> None:
    """After a save: a new URL (or a new ``validation``) needs consent again. Called in
    the saving transaction; the handshake is dispatched once it commits."""
    if not (url_changed or validation_changed):
        return
    if endpoint.validation != Validation.CLOUDEVENTS:
        if endpoint.validation_state is not None:
            _reset(endpoint, state=None, next_at=None)
            # What waited for a consent goes now.
            endpoint_id = endpoint.pk
            transaction.on_commit(lambda: wake_endpoints([endpoint_id]), robust=True)
        return
    _reset(endpoint, state=ValidationState.PENDING, next_at=_lease_end())
    _dispatch_on_commit(endpoint.pk)


def _lease_end() -> Any:
    return timezone.now() + timedelta(seconds=DISPATCH_LEASE_SECONDS)


def _reset(endpoint: Endpoint, *, state: str | None, next_at: Any) -> None:
    fields: dict[str, Any] = {
        "validation_state": state,
        "validation_reason": "",
        "validation_next_at": next_at,
        "validation_tries": 0,
        "validation_allowed_rate": None,
    }
    Endpoint.objects.filter(pk=endpoint.pk).update(**fields)
    for name, value in fields.items():
        setattr(endpoint, name, value)


def _dispatch_on_commit(endpoint_id: UUID) -> None:
    transaction.on_commit(lambda: dispatch_task(HANDSHAKE_TASK, str(endpoint_id)), robust=True)


def endpoint_request_validation(*, endpoint_id: UUID) -> Endpoint:
    """Ask the target again (a button): the state goes back to ``pending`` and a handshake
    is dispatched. Raises `ValidationUnavailable` for an endpoint without the handshake,
    `ValidationFolded` when asked again within WEBHOOKS_VALIDATION_MIN_INTERVAL_SECONDS
    (whoever asks: the button must not make us send OPTIONS requests at will)."""
    with transaction.atomic():
        endpoint = Endpoint.objects.select_for_update(no_key=True).get(pk=endpoint_id)
        if endpoint.validation != Validation.CLOUDEVENTS:
            raise ValidationUnavailable('the endpoint\'s validation is "none"')
        problem = validation_rules.origin_problem(conf.validation().origin)
        if problem:
            raise ValidationUnavailable(problem)
        now = timezone.now()
        _refuse_if_recent(endpoint, now)
        Endpoint.objects.filter(pk=endpoint.pk).update(validation_requested_at=now)
        if endpoint.validation_state != ValidationState.VALIDATED:
            _reset(endpoint, state=ValidationState.PENDING, next_at=_lease_end())
        else:
            # Asking a target that consented again keeps sending meanwhile.
            Endpoint.objects.filter(pk=endpoint.pk).update(validation_next_at=_lease_end())
        _dispatch_on_commit(endpoint.pk)
    endpoint.refresh_from_db()
    return endpoint


def _refuse_if_recent(endpoint: Endpoint, now: Any) -> None:
    asked = endpoint.validation_requested_at
    if asked is None:
        return
    left = conf.validation().min_interval_seconds - (now - asked).total_seconds()
    if left <= 0:
        return
    checked = endpoint.validation_checked_at
    raise ValidationFolded(
        retry_after=max(1, math.ceil(left)), pending=checked is None or checked < asked
    )


def endpoint_handshake(*, endpoint_id: UUID | str) -> str | None:
    """Run the handshake for the endpoint's current URL and record its verdict; returns
    the new state (None when there was nothing to do)."""
    endpoint = Endpoint.objects.filter(pk=endpoint_id).first()
    if endpoint is None or endpoint.validation != Validation.CLOUDEVENTS:
        return None
    if endpoint.state == EndpointState.DISABLED:
        return endpoint.validation_state
    settings = conf.validation()
    problem = validation_rules.origin_problem(settings.origin)
    now = timezone.now()
    if problem:
        return _record(endpoint, validation_rules.Verdict(False, problem), now)
    rate = validation_rules.requested_rate(_operator_rate(endpoint))
    response = transport.request(
        "OPTIONS",
        endpoint.url,
        validation_rules.request_headers(settings.origin, rate),
        connect_timeout=endpoint.connect_timeout_seconds,
        read_timeout=endpoint.read_timeout_seconds,
        policy=conf.endpoint_address_policy(endpoint),
        deadline=deadlines.after(endpoint.connect_timeout_seconds + endpoint.read_timeout_seconds),
        # The same way out as its deliveries: through the egress proxy, with its client
        # certificate (a target that demands one would refuse the handshake without it).
        tls=endpoint.client_tls() if endpoint.url.lower().startswith("https:") else None,
        proxy_url=conf.get().egress_proxy_url,
    )
    verdict = validation_rules.decide(
        origin=settings.origin,
        status_code=response.status_code,
        headers=response.headers,
        error=response.error,
    )
    if "refused by the SSRF guard" in response.error:
        # Our own rule: asking again changes nothing until the URL or the rule does.
        verdict = validation_rules.Verdict(False, response.error)
    return _record(endpoint, verdict, now)


def _operator_rate(endpoint: Endpoint) -> int | None:
    if endpoint.rate_limit_per_second is not None:
        return endpoint.rate_limit_per_second
    return conf.health().endpoint_rate_limit or None


def _record(endpoint: Endpoint, verdict: validation_rules.Verdict, now: Any) -> str | None:
    """Write the verdict, only if the URL is still the one that was asked."""
    settings = conf.validation()
    fields: dict[str, Any] = {"validation_checked_at": now, "validation_reason": verdict.reason}
    if verdict.consent:
        fields.update(
            validation_state=ValidationState.VALIDATED,
            validation_next_at=None,
            validation_tries=0,
            validation_allowed_rate=verdict.allowed_rate,
        )
    elif verdict.retry and endpoint.validation_tries + 1 < validation_rules.MAX_TRIES:
        tries = endpoint.validation_tries + 1
        delay = validation_rules.retry_delay(
            tries, base=settings.retry_seconds, cap=settings.retry_max_seconds
        )
        fields.update(
            validation_state=(
                # A target that consented before keeps its consent while it is down.
                ValidationState.VALIDATED
                if endpoint.validation_state == ValidationState.VALIDATED
                else ValidationState.PENDING
            ),
            validation_next_at=now + timedelta(seconds=delay),
            validation_tries=tries,
            validation_reason=f"{verdict.reason} (next try in {delay:.0f} s)"[:500],
        )
    else:
        if verdict.retry:
            fields["validation_reason"] = (
                f"{verdict.reason} ({validation_rules.MAX_TRIES} tries unanswered)"[:500]
            )
        fields.update(
            validation_state=ValidationState.REFUSED,
            validation_next_at=None,
            validation_tries=0,
            validation_allowed_rate=None,
        )
    fields["validation_reason"] = fields["validation_reason"][:500]
    written = Endpoint.objects.filter(
        pk=endpoint.pk, url=endpoint.url, validation=Validation.CLOUDEVENTS
    ).update(**fields)
    if not written:
        return None  # the URL changed meanwhile: its own handshake decides
    logger.info(
        "endpoint handshake",
        extra={"endpoint": str(endpoint.pk), "state": fields["validation_state"]},
    )
    if verdict.consent:
        wake_endpoints([endpoint.pk])
    return str(fields["validation_state"])


def handshakes_due() -> int:
    """Dispatch the handshakes whose time came (beat); returns how many."""
    due = list(
        Endpoint.objects.filter(
            validation=Validation.CLOUDEVENTS, validation_next_at__lte=timezone.now()
        )
        .exclude(state=EndpointState.DISABLED)
        .order_by("validation_next_at")
        .values_list("pk", flat=True)[:DUE_BATCH]
    )
    if due:
        Endpoint.objects.filter(pk__in=due).update(validation_next_at=_lease_end())
    for endpoint_id in due:
        dispatch_task(HANDSHAKE_TASK, str(endpoint_id))
    return len(due)


def granted_rate(endpoint: Endpoint) -> int | None:
    """The rate the target granted (requests per minute), while it applies."""
    if endpoint.validation != Validation.CLOUDEVENTS:
        return None
    return endpoint.validation_allowed_rate
