"""The models both apps use: API tokens (the HTTP API's bearer tokens) and the audit log.

They live in the app ``webhooks_core`` so a host that only receives, or only sends, has
them without the other side's tables.
"""

import hashlib
import secrets

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models

from webhooks_core import tenants

if not apps.is_installed("webhooks_core"):
    # A host from before 0.2 lists only the sides; say what to add, not Django's riddle
    # about an app_label.
    raise ImproperlyConfigured(
        'Add "webhooks_core" to INSTALLED_APPS, beside "deliveries" and/or "receivers" '
        "(API tokens and the audit log live there since django-reliable-webhooks 0.2)."
    )


def hash_api_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class ApiToken(models.Model):
    """A bearer token for the HTTP API. Only its SHA-256 is stored."""

    PREFIX = "whk_"

    name = models.CharField(max_length=200)
    # Set: the token reaches this tenant's endpoints, events, deliveries, replays and portal
    # only (webhooks_core/api/scoping.py). NULL: every tenant's, and the receiving side.
    tenant = models.CharField(  # noqa: DJ001
        max_length=100,
        null=True,
        blank=True,
        help_text="Limit the token to this tenant (its endpoints, events, deliveries, "
        "replays and portal links); empty: every tenant and the receiving side.",
    )
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_prefix = models.CharField(max_length=16, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        scope = f" for {self.tenant}" if self.tenant else ""
        return f"{self.name}{scope} ({self.token_prefix}…)"

    @classmethod
    def issue(cls, name: str, *, tenant: str | None = None) -> tuple["ApiToken", str]:
        """Create a token (limited to ``tenant`` if given); the plain value is returned
        once and never stored. A bad tenant id raises ``ValueError``."""
        problem = tenants.problem(tenant)
        if problem:
            raise ValueError(f"tenant {problem}")
        plain = cls.PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            name=name,
            tenant=tenant or None,
            token_hash=hash_api_token(plain),
            token_prefix=plain[:10],
        )
        return token, plain


class AuditEntry(models.Model):
    """Who did what, when: an act that reveals a secret or opens or erases a tenant's data.

    Never a secret, and no personal data: ``actor`` names an API token, an admin user's
    id, a command or a portal session; ``counts`` holds numbers only.
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    action = models.CharField(max_length=50)
    actor = models.CharField(max_length=200)
    api_token = models.ForeignKey(
        ApiToken, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    # NULL once the tenant is erased (its id goes with its data).
    tenant = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    target = models.CharField(max_length=200, blank=True)
    counts = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = "audit entry"
        verbose_name_plural = "audit log"

    def __str__(self) -> str:
        return f"{self.action} by {self.actor} at {self.at:%Y-%m-%d %H:%M:%S}"
