"""Tenant-scoped API tokens: what a token limited to tenant T may reach.

A token with a tenant (``create_api_token NAME --tenant T``, or the admin's token form)
lists, reads, changes and deletes only T's endpoints, events, deliveries and replays;
another tenant's object is a 404, exactly like one that does not exist. A request body or
a ``?tenant=`` filter naming another tenant (or ``null``, no tenant) is a 403; a body
without a tenant means T. It opens portal sessions for T only and gets a 403 from the
receiving side (sources, inbox) and from tenant erasure. A token without a tenant keeps
its reach over every tenant.

The views call these functions; every rule about a token's scope is written here once.
"""

from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from webhooks_core.models import ApiToken


class TenantForbidden(PermissionDenied):
    default_detail = "This token is limited to another tenant."


def token_of(request: Request) -> ApiToken | None:
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, ApiToken) else None


def token_tenant(request: Request) -> str | None:
    """The tenant the request's token is limited to; None for an unscoped token."""
    token = token_of(request)
    return token.tenant if token is not None else None


def forbidden(tenant: str) -> TenantForbidden:
    return TenantForbidden(f"This token is limited to tenant {tenant!r}.")


def scoped(request: Request, queryset: QuerySet[Any], field: str = "tenant") -> QuerySet[Any]:
    """Only the rows of the token's tenant (all of them for an unscoped token)."""
    tenant = token_tenant(request)
    return queryset if tenant is None else queryset.filter(**{field: tenant})


def check_named_tenant(request: Request, named: Any) -> None:
    """A tenant named by the request (in a body or a filter): 403 if it is not the token's."""
    tenant = token_tenant(request)
    if tenant is not None and named != tenant:
        raise forbidden(tenant)


def check_body(request: Request) -> None:
    """A request body that names another tenant (or ``null``) is a 403, before anything
    else about it is looked at."""
    data = request.data
    if isinstance(data, Mapping) and "tenant" in data:
        check_named_tenant(request, data["tenant"])


def tenant_for_write(request: Request, validated: Mapping[str, Any]) -> str | None:
    """The tenant a write gives its object: the body's; for a scoped token, its own."""
    tenant = token_tenant(request)
    if tenant is None:
        return validated.get("tenant")
    check_named_tenant(request, validated.get("tenant", tenant))
    return tenant


def with_token_tenant(request: Request) -> Any:
    """The request body with the token's tenant filled in where it names none."""
    tenant = token_tenant(request)
    data = request.data
    if tenant is not None and isinstance(data, Mapping) and "tenant" not in data:
        return {**data, "tenant": tenant}
    return data


class UnscopedTokenOnly(BasePermission):
    """For what no single tenant owns: the receiving side, erasing a tenant."""

    message = "A token limited to a tenant cannot use this part of the API."

    def has_permission(self, request: Request, view: Any) -> bool:
        token = token_of(request)
        return token is not None and token.tenant is None
