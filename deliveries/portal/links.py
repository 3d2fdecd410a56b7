"""Portal links: one-time links that open a tenant's portal session.

The link carries a random token; only its SHA-256 is stored (as API tokens are), so a
database dump opens nothing. Opening the link consumes it with one conditional UPDATE:
of two requests racing with the same link, exactly one opens a session. The session
is the link's row itself, alive until ``expires_at`` unless ended sooner.

Opening a link draws a second random value, the session's own secret: the portal's
cookie carries it, and the row keeps only its SHA-256. A session is found by that secret,
never by the row's (sequential) id, so whoever knows ``SECRET_KEY`` still cannot forge
one. Looking at a link (:func:`portal_link_peek`) consumes nothing: an e-mail
scanner's GET leaves it usable.
"""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from deliveries.models import ApiToken, PortalLink
from deliveries.operator.audit import (
    PORTAL_SECRET_REVEALED,
    PORTAL_SESSION_CREATED,
    audit_record,
    token_actor,
)
from webhooks_core import tenants

DEFAULT_EXPIRES_IN = 3600
MAX_EXPIRES_IN = 86400


class PortalLinkForbidden(PermissionError):
    """The caller may not open this tenant's portal; nothing was written."""


class PortalLinkInvalid(ValueError):
    """The link cannot be issued as asked; nothing was written."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def portal_link_create(
    *,
    tenant: str,
    expires_in: int = DEFAULT_EXPIRES_IN,
    requested_via: str = "",
    api_token: ApiToken | None = None,
) -> tuple[PortalLink, str]:
    """Issue a link for ``tenant``, valid (and its session open) for ``expires_in`` seconds.

    Returns the row and the token, which is never stored and cannot be shown again. A
    token limited to a tenant gets links for that tenant only (``PortalLinkForbidden``).
    The issue is written to the audit log: who (``requested_via``), which token, when.
    """
    if api_token is not None and api_token.tenant is not None and tenant != api_token.tenant:
        raise PortalLinkForbidden(f"this token is limited to tenant {api_token.tenant!r}")
    if tenant is None:
        raise PortalLinkInvalid("tenant", "is required")
    problem = tenants.problem(tenant)
    if problem:
        raise PortalLinkInvalid("tenant", problem)
    if (
        isinstance(expires_in, bool)
        or not isinstance(expires_in, int)
        or not 1 <= expires_in <= MAX_EXPIRES_IN
    ):
        raise PortalLinkInvalid("expires_in", f"must be 1 to {MAX_EXPIRES_IN} seconds")
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        link = PortalLink.objects.create(
            token_hash=_hash(token),
            tenant=tenant,
            requested_via=requested_via[:200],
            api_token=api_token,
            expires_at=timezone.now() + timedelta(seconds=expires_in),
        )
        audit_record(
            action=PORTAL_SESSION_CREATED,
            actor=token_actor(api_token) if api_token is not None else requested_via or "?",
            tenant=tenant,
            api_token_id=api_token.pk if api_token is not None else None,
            target=f"portal link #{link.pk}",
        )
    return link, token


def portal_secret_revealed(*, tenant: str, session_id: int | None, endpoint_id: object) -> None:
    """Write the audit entry of a portal page that shows an endpoint's signing secret:
    the session (and the API token whose link opened it), the endpoint, the time."""
    link = (
        PortalLink.objects.filter(pk=session_id, tenant=tenant).select_related("api_token").first()
        if session_id is not None
        else None
    )
    if link is None:
        actor = f"portal of {tenant} (host login)"
    else:
        via = f", link from {token_actor(link.api_token)}" if link.api_token else ""
        actor = f"portal session #{link.pk}{via}"
    audit_record(
        action=PORTAL_SECRET_REVEALED,
        actor=actor,
        tenant=tenant,
        api_token_id=link.api_token_id if link is not None else None,
        target=f"endpoint {endpoint_id}",
    )


@dataclass(frozen=True)
class PortalSession:
    """A session just opened: its row, and its secret (for the cookie; never stored)."""

    link: PortalLink
    secret: str


def _usable(token: str) -> bool:
    return isinstance(token, str) and 0 < len(token) <= 200


def portal_link_peek(*, token: str) -> PortalLink | None:
    """The link, when it could still open a session; consumes nothing."""
    if not _usable(token):
        return None
    return PortalLink.objects.filter(
        token_hash=_hash(token),
        used_at__isnull=True,
        ended_at__isnull=True,
        expires_at__gt=timezone.now(),
    ).first()


def portal_link_open(*, token: str) -> PortalSession | None:
    """Consume the link: its new session when this call was the first use, else None.

    None for an unknown, used or expired link alike, so the answer tells nothing about
    which links exist.
    """
    if not _usable(token):
        return None
    now = timezone.now()
    token_hash = _hash(token)
    secret = secrets.token_urlsafe(32)
    opened = PortalLink.objects.filter(
        token_hash=token_hash, used_at__isnull=True, ended_at__isnull=True, expires_at__gt=now
    ).update(used_at=now, session_hash=_hash(secret))
    if not opened:
        return None
    return PortalSession(link=PortalLink.objects.get(token_hash=token_hash), secret=secret)


def portal_session_find(*, secret: str) -> PortalLink | None:
    """The open session whose secret this is, or None (unknown, expired or ended)."""
    if not _usable(secret):
        return None
    return PortalLink.objects.filter(
        session_hash=_hash(secret),
        used_at__isnull=False,
        ended_at__isnull=True,
        expires_at__gt=timezone.now(),
    ).first()


def portal_session_tenant(*, session_id: int) -> str | None:
    """The tenant of an open portal session, or None when it expired or was ended."""
    return (
        PortalLink.objects.filter(
            pk=session_id,
            used_at__isnull=False,
            ended_at__isnull=True,
            expires_at__gt=timezone.now(),
        )
        .values_list("tenant", flat=True)
        .first()
    )


def portal_session_end(*, session_id: int) -> None:
    PortalLink.objects.filter(pk=session_id, ended_at__isnull=True).update(ended_at=timezone.now())


def portal_links_purge() -> int:
    """Delete links whose session ended more than a day ago (with the retention purge)."""
    cutoff = timezone.now() - timedelta(days=1)
    return PortalLink.objects.filter(expires_at__lt=cutoff).delete()[0]
