"""The audit log of acts that open a tenant's data or reveal a secret (``AuditEntry``).

Operators read it in the admin ("Audit log"). An entry names who acted (an API token, an
admin user's id, a command, a portal session), never a secret and no personal data.
"""

from typing import Any

from deliveries.models import ApiToken
from webhooks_core.models import AuditEntry

PORTAL_SESSION_CREATED = "portal_session.create"
PORTAL_SECRET_REVEALED = "portal.secret_reveal"  # noqa: S105  (an action name)
TENANT_SETTINGS_CHANGED = "tenant.settings"
TENANT_ERASURE_STARTED = "tenant.erasure_start"
TENANT_ERASED = "tenant.erased"


def token_actor(token: ApiToken) -> str:
    return f"api token #{token.pk} ({token.name})"[:200]


def audit_record(
    *,
    action: str,
    actor: str,
    tenant: str | None = None,
    api_token_id: int | None = None,
    user_id: int | None = None,
    target: str = "",
    counts: dict[str, Any] | None = None,
) -> AuditEntry:
    """Write one entry (inside the caller's transaction, if any)."""
    return AuditEntry.objects.create(
        action=action,
        actor=actor[:200],
        tenant=tenant,
        api_token_id=api_token_id,
        user_id=user_id,
        target=target[:200],
        counts=counts or {},
    )
