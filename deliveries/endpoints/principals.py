"""Who changes an endpoint, and what that principal may do: decided here once.

There are two kinds of principal. An *operator* (the admin, an API token without a
tenant) runs the platform. A *tenant* is one customer, whether it comes through its portal
session or through an API token limited to it (``create_api_token NAME --tenant T``):
both are the same principal and meet the same rules, which the portal's views and the
API's views get from the functions below.

- Addresses: every URL a tenant chooses (the endpoint's URL, an OAuth2 ``token_url``, a
  broker URL) is judged by the tenant's policy (`conf.portal_address_policy`: public
  addresses and ``WEBHOOKS_PORTAL_ALLOWED_NETWORKS``) when it is saved and again at every
  connect, whoever chose the endpoint's other URLs (`conf.endpoint_address_policy`,
  `conf.token_url_policy`). A name that does not resolve at save is judged at connect.
- States: a tenant may disable its active endpoint and make active again only what
  `endpoint_tenant_may_enable` allows (never what an operator suspended or disabled); it
  never suspends one.
- Fields: `OPERATOR_FIELDS` are the operator's (how much of the platform an endpoint
  takes, whether it is suspended on failures); a tenant may not weaken the consent its
  endpoints are asked for (``WEBHOOKS_PORTAL_ENDPOINT_VALIDATION``).
"""

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from deliveries.endpoints.lifecycle import (
    EndpointNotEnableable,
    endpoint_create,
    endpoint_set_state,
    endpoint_tenant_disable,
    endpoint_tenant_enable,
    endpoint_update,
)
from deliveries.endpoints.validation import portal_default
from deliveries.models import Endpoint, EndpointState, Validation

#: What only an operator sets: the platform's share an endpoint takes (concurrency,
#: rate) and the rules that stop sending to a failing one.
OPERATOR_FIELDS = frozenset(
    {"max_in_flight", "rate_limit_per_second", "suspend_after_failures", "suspend_window_seconds"}
)
OPERATOR_ONLY = "Set by the operator of this service."


@dataclass(frozen=True)
class Principal:
    """Who asks: ``tenant`` None for an operator, else the tenant it acts for."""

    tenant: str | None = None

    @property
    def is_tenant(self) -> bool:
        return self.tenant is not None


OPERATOR = Principal()


class EndpointForbidden(PermissionError):
    """The principal may not make this change; ``errors`` maps fields to reasons."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in errors.items()))


def field_refusals(principal: Principal, fields: dict[str, Any]) -> dict[str, list[str]]:
    """The fields among ``fields`` this principal may not set (none for an operator)."""
    if not principal.is_tenant:
        return {}
    errors = {name: [OPERATOR_ONLY] for name in sorted(OPERATOR_FIELDS & set(fields))}
    if (
        "validation" in fields
        and portal_default() == Validation.CLOUDEVENTS
        and fields["validation"] != Validation.CLOUDEVENTS
    ):
        errors["validation"] = [
            'Must be "cloudevents": this service asks every target for its consent.'
        ]
    return errors


def _check(principal: Principal, fields: dict[str, Any]) -> None:
    errors = field_refusals(principal, fields)
    if errors:
        raise EndpointForbidden(errors)


def endpoint_create_by(*, principal: Principal, **fields: Any) -> tuple[Endpoint, str]:
    """`endpoint_create` for this principal: a tenant's endpoint is its own (``tenant``),
    its URLs judged by the tenant's policy now and at every connect."""
    fields.pop("state", None)
    _check(principal, fields)
    if principal.is_tenant:
        if fields.get("tenant", principal.tenant) != principal.tenant:
            raise EndpointForbidden({"tenant": [f"Must be {principal.tenant!r}."]})
        fields["tenant"] = principal.tenant
    return endpoint_create(chosen_by_tenant=principal.is_tenant, **fields)


def endpoint_update_by(*, principal: Principal, endpoint: Endpoint, **changes: Any) -> Endpoint:
    """`endpoint_update` for this principal; a tenant's ``state`` goes through the
    tenant's rules (`endpoint_state_by`). Nothing is written when anything is refused."""
    if not principal.is_tenant:
        return endpoint_update(endpoint=endpoint, **changes)
    _check(principal, changes)
    state = changes.pop("state", None)
    if changes.get("url") == endpoint.url:
        # The same URL given back (a PATCH of the whole object) stays whoever's it was.
        changes.pop("url")
    with transaction.atomic():
        saved = endpoint_update(endpoint=endpoint, chosen_by_tenant=True, **changes)
        if state is not None:
            endpoint_state_by(principal=principal, endpoint=saved, state=state)
            saved.refresh_from_db()
    return saved


def endpoint_state_by(*, principal: Principal, endpoint: Endpoint, state: str) -> None:
    """Move the endpoint to ``state`` if this principal may: an operator always; a
    tenant only by the portal's rules. Raises `EndpointForbidden`."""
    if not principal.is_tenant:
        endpoint_set_state(endpoint_id=endpoint.pk, state=state)
        return
    if state == endpoint.state:
        return
    if state == EndpointState.DISABLED:
        if not endpoint_tenant_disable(endpoint_id=endpoint.pk):
            raise EndpointForbidden({"state": ["Only an active endpoint can be disabled."]})
        return
    if state == EndpointState.ACTIVE:
        try:
            endpoint_tenant_enable(endpoint_id=endpoint.pk)
        except EndpointNotEnableable:
            raise EndpointForbidden(
                {
                    "state": [
                        "This endpoint stays as it is until the operator of this service "
                        "enables it (or, after its failures, until a test event succeeds)."
                    ]
                }
            ) from None
        return
    raise EndpointForbidden({"state": [OPERATOR_ONLY]})
