"""Data of the receiving side: sources, their secrets, and the durable inbox."""

import hashlib
import uuid

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from webhooks_core.crypto import encryption
from webhooks_core.crypto.secret_rotation import RotatingSecret
from webhooks_core.db.jobs import LeasedJob

DEFAULT_TOLERANCE_SECONDS = 300
DEFAULT_MAX_BODY_BYTES = 256 * 1024


class Source(models.Model):
    """One inbound provider configuration, reached at ``/receivers/<slug>/``."""

    slug = models.SlugField(max_length=100, unique=True)
    #: A name in the registry of schemes (``receivers.schemes.SCHEMES``: the built-in ones
    #: and the host's ``RECEIVERS_SCHEMES``), checked by the services, not by choices here:
    #: a new provider needs no migration.
    scheme = models.CharField(max_length=50)
    description = models.CharField(max_length=500, blank=True)
    enabled = models.BooleanField(default=True)
    tolerance_seconds = models.PositiveIntegerField(
        default=DEFAULT_TOLERANCE_SECONDS,
        validators=[MinValueValidator(1), MaxValueValidator(3600)],
        help_text="Largest accepted difference between the signed timestamp and now.",
    )
    max_body_bytes = models.PositiveIntegerField(
        default=DEFAULT_MAX_BODY_BYTES,
        validators=[MinValueValidator(1024), MaxValueValidator(10 * 1024 * 1024)],
    )
    expected_account = models.CharField(
        max_length=200, blank=True, help_text="Events from another provider account are ignored."
    )
    expected_mode = models.CharField(
        max_length=16,
        blank=True,
        choices=[("live", "live"), ("test", "test")],
        help_text="Events of the other mode (e.g. Stripe test events) are ignored.",
    )
    public_url = models.URLField(
        max_length=2048,
        blank=True,
        help_text="The URL the provider calls, as configured there, when a proxy stands in "
        "front (Twilio and Square sign it). Empty: the URL the request reached.",
    )
    # Reconciliation: the provider's API, asked for the truth about stuck objects.
    api_base_url = models.URLField(max_length=2048, blank=True)
    encrypted_api_token = models.TextField(blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    #: Not stored: what the last `source_update` on this instance did besides the change
    #: asked (an API token dropped by a change of origin), for the caller to show.
    notices: tuple[str, ...] = ()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def api_token(self) -> str:
        return encryption.decrypt(self.encrypted_api_token) if self.encrypted_api_token else ""

    @api_token.setter
    def api_token(self, plaintext: str) -> None:
        self.encrypted_api_token = encryption.encrypt(plaintext) if plaintext else ""


class SourceSecret(RotatingSecret):
    """A verification secret. Every unexpired secret is accepted."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="secrets")
    # First characters of SHA-256(secret): tells secrets apart without revealing them.
    fingerprint = models.CharField(max_length=12, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"secret {self.fingerprint}… of {self.source_id}"

    def remember_plaintext_traits(self, plaintext: str) -> None:
        self.fingerprint = hashlib.sha256(plaintext.encode("utf-8")).hexdigest()[:12]


class InboxStatus(models.TextChoices):
    RECEIVED = "received", "Received"
    PROCESSING = "processing", "Processing"
    PROCESSED = "processed", "Processed"
    RETRYING = "retrying", "Retrying"
    FAILED = "failed", "Failed"
    IGNORED = "ignored", "Ignored"


TERMINAL_STATUSES = (InboxStatus.PROCESSED, InboxStatus.FAILED, InboxStatus.IGNORED)
#: Rows whose work is done (a failed one still waits for a manual retry): what deleting a
#: source may take along without being forced.
FINISHED_STATUSES = (InboxStatus.PROCESSED, InboxStatus.IGNORED)


class InboxEvent(LeasedJob):
    """One event as the provider delivered it, stored before we answered 2xx.

    ``UNIQUE(source, event_id)`` makes every redelivery of the event land on this row; its
    processing may run many times (retries, manual retry), its arrival only once.
    ``UNIQUE(source, signed_digest)`` does the same for a replay of the same signed
    material under another (unsigned) id.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="inbox_events")
    event_id = models.CharField(max_length=255)
    type = models.CharField(max_length=200)
    status = models.CharField(
        max_length=16, choices=InboxStatus.choices, default=InboxStatus.RECEIVED
    )
    last_error = models.TextField(blank=True)
    last_traceback = models.TextField(blank=True)
    headers = models.JSONField(default=dict, help_text="Request headers without signatures.")
    raw_body = models.BinaryField(null=True, blank=True, help_text="Cleared after retention.")
    payload = models.JSONField(null=True, blank=True)
    provider_timestamp = models.DateTimeField(null=True, blank=True)
    received_at = models.DateTimeField(db_index=True)
    processed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # SHA-256 (hex) of what the provider signed, for a scheme that signs no timestamp (or
    # of a whole batch, on one of its rows): the same signed material is the same event
    # whatever its unsigned headers say (services.arrival). NULL for the others; NULLs are
    # distinct in a unique constraint, on PostgreSQL and SQLite alike.
    signed_digest = models.CharField(  # noqa: DJ001
        max_length=64, null=True, blank=True, editable=False
    )

    class Meta:
        ordering = ["-received_at", "-id"]
        verbose_name = "inbox event"
        constraints = [
            models.UniqueConstraint(
                fields=["source", "event_id"], name="inbox_unique_source_event"
            ),
            models.UniqueConstraint(
                fields=["source", "signed_digest"], name="inbox_unique_source_signed_digest"
            ),
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="inbox_due_idx",
                condition=Q(status__in=["received", "retrying"]),
            ),
            models.Index(
                fields=["lease_expires_at"],
                name="inbox_processing_lease_idx",
                condition=Q(status="processing"),
            ),
            models.Index(fields=["status", "-received_at"], name="inbox_status_received_idx"),
            models.Index(fields=["source", "type"], name="inbox_source_type_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.event_id} ({self.status})"
