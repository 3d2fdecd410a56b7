"""Data of the sending side. PostgreSQL is the source of truth; the broker only carries ids."""

import hashlib
import secrets
import uuid
from datetime import datetime

from django.db import models
from django.db.models import Q

from . import crypto
from .retry_policy import RetryPolicy


class EndpointState(models.TextChoices):
    ACTIVE = "active", "Active"
    SUSPENDED = "suspended", "Suspended"
    DISABLED = "disabled", "Disabled"


class Endpoint(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    url = models.URLField(max_length=2048)
    description = models.CharField(max_length=500, blank=True)
    owner_email = models.EmailField(blank=True)
    event_types = models.JSONField(
        default=list, help_text='Filters: exact "invoice.paid", prefix "invoice.*", or "*".'
    )
    state = models.CharField(
        max_length=16, choices=EndpointState.choices, default=EndpointState.ACTIVE
    )
    state_reason = models.CharField(max_length=500, blank=True)
    state_changed_at = models.DateTimeField(null=True, blank=True)

    max_attempts = models.PositiveIntegerField(default=12)
    backoff_base_seconds = models.FloatField(default=10.0)
    backoff_max_seconds = models.FloatField(default=900.0)
    retry_window_seconds = models.FloatField(default=24 * 3600.0)
    connect_timeout_seconds = models.FloatField(default=3.0)
    read_timeout_seconds = models.FloatField(default=10.0)
    custom_headers = models.JSONField(default=dict, blank=True)

    consecutive_failures = models.PositiveIntegerField(default=0)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_failure_at = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["state"])]

    def __str__(self) -> str:
        return self.url

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.max_attempts,
            base_backoff_seconds=self.backoff_base_seconds,
            max_backoff_seconds=self.backoff_max_seconds,
            retry_window_seconds=self.retry_window_seconds,
        )


class EndpointSecretQuerySet(models.QuerySet["EndpointSecret"]):
    def unexpired(self, now: datetime) -> "EndpointSecretQuerySet":
        return self.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))


class EndpointSecret(models.Model):
    """A signing secret, encrypted at rest. Every unexpired secret signs each request."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="secrets")
    encrypted_value = models.TextField(editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    objects = EndpointSecretQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"secret #{self.pk} of {self.endpoint_id}"

    @property
    def value(self) -> str:
        return crypto.decrypt(self.encrypted_value)

    @value.setter
    def value(self, plaintext: str) -> None:
        self.encrypted_value = crypto.encrypt(plaintext)


class Event(models.Model):
    """Something that happened in the product. Immutable once written."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    type = models.CharField(max_length=200, db_index=True)
    version = models.PositiveIntegerField(default=1)
    occurred_at = models.DateTimeField()
    data = models.JSONField()
    idempotency_key = models.CharField(max_length=255, null=True, blank=True, unique=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    fanned_out_at = models.DateTimeField(null=True, blank=True)
    # W3C trace context of the code that emitted it; sent with every attempt.
    traceparent = models.CharField(max_length=55, blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(
                fields=["created_at"],
                name="event_not_fanned_out_idx",
                condition=Q(fanned_out_at__isnull=True),
            )
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.id}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENDING = "sending", "Sending"
    SUCCEEDED = "succeeded", "Succeeded"
    DEAD_LETTERED = "dead_lettered", "Dead-lettered"
    CANCELLED = "cancelled", "Cancelled"
    HELD = "held", "Held (endpoint suspended)"


class Delivery(models.Model):
    """One event to one endpoint. Its row, not a broker message, says what is left to do."""

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    is_replay = models.BooleanField(default=False)
    attempts = models.PositiveIntegerField(default=0)
    # A manual retry starts a fresh retry cycle: the policy counts attempts since then.
    attempts_before_cycle = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # When a task message was last sent for this row; NULL means none is out, so the
    # sweeper enqueues the row as soon as it is due.
    enqueued_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_token = models.UUIDField(null=True, blank=True, editable=False)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    first_attempt_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["event", "endpoint"],
                condition=Q(is_replay=False),
                name="one_normal_delivery_per_event_endpoint",
            )
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="delivery_pending_due_idx",
                condition=Q(status="pending"),
            ),
            models.Index(
                fields=["lease_expires_at"],
                name="delivery_sending_lease_idx",
                condition=Q(status="sending"),
            ),
            models.Index(fields=["status", "-created_at"], name="delivery_status_created_idx"),
            models.Index(fields=["endpoint", "status"], name="delivery_endpoint_status_idx"),
        ]

    def __str__(self) -> str:
        return f"delivery #{self.pk} ({self.status})"

    @property
    def attempts_in_cycle(self) -> int:
        return self.attempts - self.attempts_before_cycle


class Attempt(models.Model):
    """One HTTP try of a delivery, kept whatever its outcome."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_set")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.FloatField()
    request_headers = models.JSONField(default=dict)
    response_status = models.PositiveIntegerField(null=True, blank=True)
    response_body = models.TextField(blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["delivery_id", "number", "id"]
        indexes = [models.Index(fields=["delivery", "number"])]

    def __str__(self) -> str:
        return f"attempt {self.number} of delivery #{self.delivery_id}"


def hash_api_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class ApiToken(models.Model):
    """A bearer token for the HTTP API. Only its SHA-256 is stored."""

    PREFIX = "whk_"

    name = models.CharField(max_length=200)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_prefix = models.CharField(max_length=16, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.token_prefix}…)"

    @classmethod
    def issue(cls, name: str) -> tuple["ApiToken", str]:
        """Create a token; the plain value is returned once and never stored."""
        plain = cls.PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            name=name, token_hash=hash_api_token(plain), token_prefix=plain[:10]
        )
        return token, plain
