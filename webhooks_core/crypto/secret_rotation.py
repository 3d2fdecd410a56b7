"""Rotating secrets encrypted at rest: endpoint secrets (sending) and source secrets
(receiving) are both this abstract model."""

from datetime import datetime
from typing import Any

from django.db import models
from django.db.models import Q

from webhooks_core.crypto import encryption


class RotatingSecretQuerySet(models.QuerySet[Any]):
    def unexpired(self, now: datetime) -> "RotatingSecretQuerySet":
        return self.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))

    def expire_by(self, deadline: datetime, now: datetime) -> int:
        """Rotation's grace: the secrets valid at ``now`` stop at ``deadline`` at the
        latest (one that already ends sooner keeps its end). One conditional UPDATE, so
        two rotations at once cannot lengthen each other's grace. Returns the rows changed."""
        return (
            self.unexpired(now)
            .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=deadline))
            .update(expires_at=deadline)
        )


class RotatingSecret(models.Model):
    """A secret encrypted at rest that stays valid until ``expires_at`` (rotation grace).

    Endpoint secrets (sending) and source secrets (receiving) share it.
    """

    encrypted_value = models.TextField(editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    objects = RotatingSecretQuerySet.as_manager()

    class Meta:
        abstract = True

    @property
    def value(self) -> str:
        return encryption.decrypt(self.encrypted_value)

    @value.setter
    def value(self, plaintext: str) -> None:
        self.encrypted_value = encryption.encrypt(plaintext)
        self.remember_plaintext_traits(plaintext)

    def remember_plaintext_traits(self, plaintext: str) -> None:
        """Hook for what a subclass keeps about a new value (never the value itself)."""
