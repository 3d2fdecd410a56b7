"""Who is asking: the tenant of a portal request, and the decorator every page wears."""

import logging
from collections.abc import Callable
from datetime import datetime
from functools import lru_cache, wraps
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.utils.module_loading import import_string
from django.views.decorators.csrf import csrf_protect

from deliveries import conf, services
from deliveries.models import PortalLink
from webhooks_core import tenants

logger = logging.getLogger(__name__)

#: The portal's own cookie: the session's random secret (signed too), sent only under the
#: portal's URL prefix, so it neither reaches nor depends on the host's pages and sessions.
#: The database keeps only the secret's hash: neither a database dump nor SECRET_KEY
#: makes a cookie that opens a session.
COOKIE = "webhooks_portal"
SALT = "deliveries.portal.session"
_CACHED = "_webhooks_portal_session"

Resolver = Callable[[HttpRequest], str | None]
View = Callable[..., HttpResponse]


@lru_cache(maxsize=4)
def _resolver(path: str) -> Resolver:
    resolver: Resolver = import_string(path)
    return resolver


def portal_root() -> str:
    return reverse("webhooks_portal:home")


def session(request: HttpRequest) -> PortalLink | None:
    """The open portal session this request's cookie names (looked up once per request)."""
    if not hasattr(request, _CACHED):
        raw = request.get_signed_cookie(COOKIE, default=None, salt=SALT)
        setattr(request, _CACHED, services.portal_session_find(secret=raw) if raw else None)
    found: PortalLink | None = getattr(request, _CACHED)
    return found


def session_id(request: HttpRequest) -> int | None:
    current = session(request)
    return current.pk if current is not None else None


def tenant_of(request: HttpRequest) -> str | None:
    """The tenant a portal session (first) or the host's resolver gives this request."""
    current = session(request)
    if current is not None:
        return current.tenant
    path = conf.portal().tenant_resolver
    if not path:
        return None
    tenant = _resolver(path)(request)
    if tenant is not None and tenants.problem(tenant):
        # The host's callable returned something that is not a tenant id: refuse rather
        # than guess (a query with it could match nothing, or the wrong rows).
        logger.error("WEBHOOKS_PORTAL_TENANT_RESOLVER returned an invalid tenant id")
        return None
    return tenant


def open_session(
    response: HttpResponse, request: HttpRequest, *, secret: str, expires_at: datetime
) -> None:
    response.set_signed_cookie(
        COOKIE,
        secret,
        salt=SALT,
        max_age=max(int((expires_at - timezone.now()).total_seconds()), 0),
        path=portal_root(),
        secure=request.is_secure(),
        httponly=True,
        samesite="Lax",
    )


def close_session(response: HttpResponse) -> None:
    response.delete_cookie(COOKIE, path=portal_root(), samesite="Lax")


def private(response: HttpResponse) -> HttpResponse:
    """No caching of tenant pages, and no portal URL leaks to the sites it links to."""
    add_never_cache_headers(response)
    response["Referrer-Policy"] = "same-origin"
    return response


def refused(request: HttpRequest, reason: str) -> HttpResponse:
    response = TemplateResponse(
        request, "webhooks_portal/refused.html", {"reason": reason}, status=403
    )
    response["Referrer-Policy"] = "no-referrer"
    add_never_cache_headers(response)
    return response


def portal_view(view: View) -> View:
    """A tenant's page: refused (403) without a tenant, CSRF-checked, never cached.

    The view is called as ``view(request, tenant, ...)``; it must scope every query by
    that tenant.
    """

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        tenant = tenant_of(request)
        if tenant is None:
            return refused(request, "no-session")
        return private(view(request, tenant, *args, **kwargs))

    protected: View = csrf_protect(wrapper)
    return protected
