"""Data of the sending side. PostgreSQL is the source of truth; the broker only carries ids."""

import uuid
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from deliveries.endpoints import field_rules
from deliveries.endpoints.headers import MASK
from webhooks_core.crypto import encryption, signing
from webhooks_core.crypto.secret_rotation import RotatingSecret
from webhooks_core.db.jobs import LeasedJob
from webhooks_core.egress.urlmask import masked_url
from webhooks_core.models import ApiToken
from webhooks_core.retry_policy import RetryPolicy

if TYPE_CHECKING:
    from deliveries.destinations.http_client.client_tls import ClientTLS
    from deliveries.destinations.http_client.oauth2 import ClientCredentials

_DEFAULTS = field_rules.DEFAULTS


class EndpointState(models.TextChoices):
    ACTIVE = "active", "Active"
    SUSPENDED = "suspended", "Suspended"
    DISABLED = "disabled", "Disabled"


class CircuitState(models.TextChoices):
    CLOSED = "closed", "Closed (sending)"
    OPEN = "open", "Open (waiting for the cool-down)"
    HALF_OPEN = "half_open", "Half-open (one probe in flight)"


class SignatureScheme(models.TextChoices):
    V1 = signing.SCHEME_V1, "v1 (HMAC-SHA256)"
    V1A = signing.SCHEME_V1A, "v1a (ed25519)"
    BOTH = signing.SCHEME_BOTH, "v1 and v1a"


class EnvelopeKind(models.TextChoices):
    DEFAULT = "default", "Default JSON"
    CLOUDEVENTS = "cloudevents", "CloudEvents 1.0 (structured JSON)"


class Validation(models.TextChoices):
    """Whether the target must consent before it is sent to
    (deliveries/endpoints/validation_rules.py)."""

    NONE = "none", "None"
    CLOUDEVENTS = "cloudevents", "CloudEvents webhook handshake"


class ValidationState(models.TextChoices):
    PENDING = "pending", "Pending (waiting for the target's consent)"
    VALIDATED = "validated", "Validated (the target consented)"
    REFUSED = "refused", "Refused (no consent; deliveries wait)"


class StateSetBy(models.TextChoices):
    """Who put an endpoint in its state: it decides who may make it active again.

    A tenant may re-enable in the portal only what the failures suspended (after a
    successful test event) or what it disabled itself; never what an operator did.
    """

    NOBODY = "", "Nobody (created so)"
    FAILURES = "failures", "Its failures (automatic)"
    OPERATOR = "operator", "An operator (admin or API)"
    TENANT = "tenant", "Its tenant (the portal)"


class EndpointMode(models.TextChoices):
    """How an endpoint gets its events: sent to its URL, or read by its consumer
    (deliveries/polling/)."""

    PUSH = "push", "Push (sent to its URL)"
    POLL = "poll", "Poll (read by its consumer with a key)"


class Endpoint(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Empty for a polling endpoint (`mode` poll): nothing is sent anywhere.
    url = models.URLField(max_length=field_rules.URL_MAX_LENGTH, blank=True)
    mode = models.CharField(
        max_length=8, choices=EndpointMode.choices, default=EndpointMode.PUSH, editable=False
    )
    # SHA-256 of the consumer's read key (`whpoll_…`, deliveries/polling/keys.py): a polling
    # endpoint's, or a push endpoint's catch-up key. Empty: no key.
    poll_key_hash = models.CharField(max_length=64, blank=True, default="", editable=False)
    poll_key_created_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Whether a tenant chose `url` (in its portal or with a token limited to it,
    # endpoints.principals): then the SSRF guard admits public addresses and
    # WEBHOOKS_PORTAL_ALLOWED_NETWORKS only, never the operators' WEBHOOKS_ALLOWED_NETWORKS
    # (conf.endpoint_address_policy). Set by the services; the name predates tenant tokens.
    url_chosen_in_portal = models.BooleanField(default=False, editable=False)
    # Whether a tenant chose the OAuth2 `auth.token_url`: then it is fetched under the
    # tenant's policy too, whoever chose `url` (conf.token_url_policy). Set by the services.
    token_url_chosen_by_tenant = models.BooleanField(default=False, editable=False)
    # A broker URL's password (deliveries/destinations/broker_urls.py), encrypted; `url` carries
    # broker_urls.MASK in its place, so no reader ever sees it. Set by the services.
    url_password = models.TextField(blank=True, default="", editable=False)
    description = models.CharField(max_length=field_rules.DESCRIPTION_MAX_LENGTH, blank=True)
    # The customer this endpoint belongs to (webhooks_core/tenants.py); NULL: no tenant.
    tenant = models.CharField(  # noqa: DJ001
        max_length=100, null=True, blank=True, db_index=True
    )
    owner_email = models.EmailField(blank=True)
    event_types = models.JSONField(
        default=list, help_text='Filters: exact "invoice.paid", prefix "invoice.*", or "*".'
    )
    state = models.CharField(
        max_length=16, choices=EndpointState.choices, default=EndpointState.ACTIVE
    )
    state_reason = models.CharField(max_length=500, blank=True)
    state_changed_at = models.DateTimeField(null=True, blank=True)
    state_set_by = models.CharField(
        max_length=16, choices=StateSetBy.choices, default=StateSetBy.NOBODY, blank=True
    )
    # The last test event that succeeded while the endpoint was not active (the portal's
    # "test, then resume"); a tenant may resume a suspension only after one.
    test_succeeded_at = models.DateTimeField(null=True, blank=True)

    # Defaults and bounds: deliveries/endpoints/field_rules.py.
    max_attempts = models.PositiveIntegerField(default=_DEFAULTS["max_attempts"])
    backoff_base_seconds = models.FloatField(default=_DEFAULTS["backoff_base_seconds"])
    backoff_max_seconds = models.FloatField(default=_DEFAULTS["backoff_max_seconds"])
    retry_window_seconds = models.FloatField(default=_DEFAULTS["retry_window_seconds"])
    connect_timeout_seconds = models.FloatField(default=_DEFAULTS["connect_timeout_seconds"])
    read_timeout_seconds = models.FloatField(default=_DEFAULTS["read_timeout_seconds"])
    # Custom headers in clear; the credentials among them (see headers.is_credential, or
    # marked secret by the operator) are in `secret_custom_headers`, each value encrypted.
    # Both are written through services.endpoint_create / endpoint_update only.
    custom_headers = models.JSONField(default=dict, blank=True)
    secret_custom_headers = models.JSONField(default=dict, blank=True, editable=False)
    # {event type: version} this endpoint receives; pinned to the newest on subscription.
    version_pins = models.JSONField(default=dict, blank=True)
    # Events sharing an ordering key are sent one at a time, in emit order (see ordering.py).
    ordered_delivery = models.BooleanField(default=False)
    # Payload filter over the event (deliveries/pipeline/payload_filters.py); NULL: every event of
    # the matching types.
    filter = models.JSONField(null=True, blank=True, default=None)
    # What `webhook-signature` carries; v1a needs a key pair (EndpointSigningKey).
    signature_scheme = models.CharField(
        max_length=8, choices=SignatureScheme.choices, default=SignatureScheme.V1
    )
    envelope = models.CharField(
        max_length=16, choices=EnvelopeKind.choices, default=EnvelopeKind.DEFAULT
    )

    # Delivery auth, written through the services only (deliveries/endpoints/auth.py).
    # OAuth2 client credentials without the secret (in `encrypted_auth_secret`); NULL: none.
    auth = models.JSONField(null=True, blank=True, default=None, editable=False)
    encrypted_auth_secret = models.TextField(blank=True, default="", editable=False)
    # Mutual TLS: the client certificate (PEM, maybe with its chain), its key encrypted,
    # and a CA bundle that replaces the system CAs for this endpoint (client_tls.py).
    client_certificate = models.TextField(blank=True, default="")
    encrypted_client_key = models.TextField(blank=True, default="", editable=False)
    ca_certificates = models.TextField(blank=True, default="")
    # The CloudEvents handshake (endpoints.validation): with `cloudevents`, nothing is sent
    # until the target consented for the current URL. The state is NULL without it.
    validation = models.CharField(
        max_length=16, choices=Validation.choices, default=Validation.NONE
    )
    validation_state = models.CharField(  # noqa: DJ001
        max_length=16, choices=ValidationState.choices, null=True, blank=True, editable=False
    )
    validation_reason = models.CharField(max_length=500, blank=True, editable=False)
    validation_checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    # When the next automatic handshake is due (NULL: none planned), and how many went
    # unanswered in a row.
    validation_next_at = models.DateTimeField(null=True, blank=True, editable=False)
    validation_tries = models.PositiveIntegerField(default=0, editable=False)
    # When someone last asked for a handshake (the API, the portal, the admin): asking
    # again sooner than WEBHOOKS_VALIDATION_MIN_INTERVAL_SECONDS is folded.
    validation_requested_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The rate the target granted (WebHook-Allowed-Rate), requests per minute; NULL: none.
    validation_allowed_rate = models.PositiveIntegerField(null=True, blank=True, editable=False)

    consecutive_failures = models.PositiveIntegerField(default=0)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_failure_at = models.DateTimeField(null=True, blank=True)

    # Health and isolation (deliveries/pipeline/owner/gate.py). Empty per-endpoint limits
    # take the global WEBHOOKS_* defaults.
    suspend_after_failures = models.PositiveIntegerField(null=True, blank=True)
    suspend_window_seconds = models.FloatField(null=True, blank=True)
    max_in_flight = models.PositiveIntegerField(null=True, blank=True)
    rate_limit_per_second = models.PositiveIntegerField(null=True, blank=True)
    # First failure of the current streak of failed attempts (NULL after a success).
    failing_since = models.DateTimeField(null=True, blank=True)
    circuit_state = models.CharField(
        max_length=16, choices=CircuitState.choices, default=CircuitState.CLOSED
    )
    circuit_changed_at = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    #: Not stored: what the last `endpoint_update` on this instance did besides the change
    #: asked (secret headers dropped by a change of origin), for the caller to show.
    notices: tuple[str, ...] = ()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["poll_key_hash"],
                condition=~Q(poll_key_hash=""),
                name="endpoint_poll_key_unique",
            )
        ]
        indexes = [
            models.Index(fields=["state"]),
            # The periodic look for handshakes due (endpoints.validation).
            models.Index(
                fields=["validation_next_at"],
                name="endpoint_validation_due_idx",
                condition=Q(validation_next_at__isnull=False),
            ),
        ]
        permissions = [
            ("suspend_resume_endpoint", "Can suspend and resume endpoints"),
            ("rotate_endpoint_secret", "Can rotate endpoint secrets"),
            ("reveal_endpoint_secret", "Can reveal endpoint secrets"),
            ("send_test_event", "Can send a test event to an endpoint"),
        ]

    def __str__(self) -> str:
        # Shown to every reader of a page naming it (a delivery's, the admin's log):
        # credentials in the URL masked; the URL field itself is for who may change it.
        if self.mode == EndpointMode.POLL:
            return f"polling endpoint {self.pk}"
        return masked_url(self.url)

    # No clean(): every rule (the SSRF guard's among them) is in services.endpoint_create
    # and endpoint_update, which the API, the admin's forms and the commands call.

    def url_plain(self) -> str:
        """The URL with a broker password put back: for the wire, never for display."""
        if not self.url_password:
            return self.url
        from deliveries.destinations.broker_urls import with_password

        return with_password(self.url, encryption.decrypt(self.url_password))

    @property
    def secret_header_names(self) -> list[str]:
        return sorted(self.secret_custom_headers or {})

    def custom_headers_masked(self) -> dict[str, str]:
        """What any reader sees: secret values replaced by `headers.MASK`."""
        return {
            **dict(self.custom_headers or {}),
            **{name: MASK for name in self.secret_custom_headers or {}},
        }

    def custom_headers_plain(self) -> dict[str, str]:
        """Every custom header with its real value: for the wire, never for display."""
        return {
            **{str(k): str(v) for k, v in (self.custom_headers or {}).items()},
            **{
                str(name): encryption.decrypt(token)
                for name, token in (self.secret_custom_headers or {}).items()
            },
        }

    def client_tls(self) -> "ClientTLS | None":
        """The endpoint's mutual-TLS settings for the wire, or None."""
        from deliveries.destinations.http_client.client_tls import ClientTLS

        if not self.client_certificate and not self.ca_certificates:
            return None
        key = encryption.decrypt(self.encrypted_client_key) if self.encrypted_client_key else ""
        return ClientTLS(self.client_certificate, key, self.ca_certificates)

    def oauth2_credentials(self) -> "ClientCredentials | None":
        """The endpoint's OAuth2 client credentials with the secret, or None."""
        if not self.auth:
            return None  # (asked on every attempt: no import for the endpoints without)
        from deliveries.destinations.http_client.oauth2 import AUTH_TYPE, ClientCredentials

        auth = self.auth
        if auth.get("type") != AUTH_TYPE:
            return None
        return ClientCredentials(
            token_url=auth["token_url"],
            client_id=auth["client_id"],
            client_secret=encryption.decrypt(self.encrypted_auth_secret),
            scope=auth.get("scope") or "",
            audience=auth.get("audience") or "",
        )

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.max_attempts,
            base_backoff_seconds=self.backoff_base_seconds,
            max_backoff_seconds=self.backoff_max_seconds,
            retry_window_seconds=self.retry_window_seconds,
        )


class EndpointSecret(RotatingSecret):
    """A signing secret. Every unexpired secret signs each request."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="secrets")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"secret #{self.pk} of {self.endpoint_id}"


class EndpointSigningKey(RotatingSecret):
    """An ed25519 key pair for ``v1a`` signatures: the private key encrypted, the public
    key in clear (it is published). Every unexpired key signs each request."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="signing_keys")
    public_key = models.CharField(max_length=64, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"signing key {self.public_key}"

    def remember_plaintext_traits(self, plaintext: str) -> None:
        self.public_key = signing.public_key_of(plaintext)


class Event(models.Model):
    """Something that happened in the product. Immutable once written."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    type = models.CharField(max_length=200, db_index=True)
    version = models.PositiveIntegerField(default=1)
    occurred_at = models.DateTimeField()
    # NULL when the data was offloaded to storage (see deliveries/pipeline/payloads.py): read it
    # with payloads.load(event), never from this field directly.
    data = models.JSONField(null=True)
    data_ref = models.CharField(max_length=255, blank=True, default="")
    # Fans out to this tenant's endpoints only; NULL: to endpoints without a tenant.
    tenant = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    data_sha256 = models.CharField(max_length=64, blank=True, default="")
    # Unique per tenant: two tenants may use the same key, and the events without a tenant
    # are one more scope of their own (see Meta.constraints).
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    # NULL, not "", means no key: the partial ordering index skips those rows.
    ordering_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    # The database's clock at insert, not the emitting host's: a key's deliveries are
    # ordered by it (see ordering.py), and web hosts' clocks may disagree.
    created_at = models.DateTimeField(db_default=Now(), db_index=True, editable=False)
    fanned_out_at = models.DateTimeField(null=True, blank=True)
    # W3C trace context of the code that emitted it; sent with every attempt.
    traceparent = models.CharField(max_length=55, blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "idempotency_key"],
                condition=Q(tenant__isnull=False, idempotency_key__isnull=False),
                name="event_idempotency_key_per_tenant",
            ),
            models.UniqueConstraint(
                fields=["idempotency_key"],
                condition=Q(tenant__isnull=True, idempotency_key__isnull=False),
                name="event_idempotency_key_no_tenant",
            ),
        ]
        indexes = [
            models.Index(
                fields=["created_at"],
                name="event_not_fanned_out_idx",
                condition=Q(fanned_out_at__isnull=True),
            ),
            models.Index(
                fields=["tenant", "-created_at"],
                name="event_tenant_created_idx",
                condition=Q(tenant__isnull=False),
            ),
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
    # A polling endpoint's delivery: its consumer reads it (deliveries/polling/); no owner
    # ever claims it and no sweeper wakes for it (both look at pending and sending only).
    AVAILABLE = "available", "Available to its consumer (polling endpoint)"


class Delivery(LeasedJob):
    """One event to one endpoint. Its row, not a broker message, says what is left to do."""

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    is_replay = models.BooleanField(default=False)
    replay = models.ForeignKey(
        "Replay", on_delete=models.SET_NULL, null=True, blank=True, related_name="deliveries"
    )
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    first_attempt_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Copied from the event when the endpoint asks for ordered delivery, else NULL, so the
    # claim can check its predecessors without a join (see ordering.py).
    ordering_key = models.CharField(  # noqa: DJ001
        max_length=255, null=True, blank=True, editable=False
    )
    ordering_position = models.DateTimeField(null=True, blank=True, editable=False)

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
            # An owner's claim and the sweeper's "has this endpoint due work?" look. The
            # claim's order whole (due time, then id): without the id, a plan may read and
            # sort every due row of the endpoint to take the first few.
            models.Index(
                fields=["endpoint", "next_attempt_at", "id"],
                name="delivery_claim_order_idx",
                condition=Q(status="pending"),
            ),
            models.Index(
                fields=["endpoint", "ordering_key", "ordering_position"],
                name="delivery_ordering_idx",
                condition=Q(ordering_key__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"delivery #{self.pk} ({self.status})"

    @property
    def attempts_in_cycle(self) -> int:
        return self.attempts - self.attempts_before_cycle


class DeadLetter(Delivery):
    """The dead-letter queue: deliveries as operators triage them (its own admin page)."""

    class Meta:
        proxy = True
        verbose_name = "dead letter"
        verbose_name_plural = "dead-letter queue"


class ReplayStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    DONE = "done", "Done"


class Replay(models.Model):
    """An operator's request to send a time range of events again.

    The deliveries are created in batches by a task; ``cursor_*`` is where the next batch
    starts, so a lost task message or a dead worker only delays the rest.
    """

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    requested_via = models.CharField(max_length=200, help_text="admin user, API token or command")
    since = models.DateTimeField()
    until = models.DateTimeField()
    event_types = models.JSONField(default=list, blank=True)
    endpoint_ids = models.JSONField(default=list, blank=True)
    # Only this tenant's events and endpoints; NULL: every tenant's (each event still goes
    # to its own tenant's endpoints only).
    tenant = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    status = models.CharField(
        max_length=16, choices=ReplayStatus.choices, default=ReplayStatus.PENDING
    )
    expected_deliveries = models.PositiveIntegerField(default=0)
    events_done = models.PositiveIntegerField(default=0)
    deliveries_created = models.PositiveIntegerField(default=0)
    cursor_created_at = models.DateTimeField(null=True, blank=True, editable=False)
    cursor_event_id = models.UUIDField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("run_replay", "Can replay events to endpoints")]

    def __str__(self) -> str:
        return f"replay #{self.pk} ({self.since:%Y-%m-%d %H:%M} → {self.until:%Y-%m-%d %H:%M})"


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


class CircuitTransition(models.Model):
    """One change of an endpoint's circuit breaker, kept for operators (admin)."""

    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.CASCADE, related_name="circuit_transitions"
    )
    from_state = models.CharField(max_length=16, choices=CircuitState.choices)
    to_state = models.CharField(max_length=16, choices=CircuitState.choices)
    reason = models.CharField(max_length=500, blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["endpoint", "-at"])]

    def __str__(self) -> str:
        return f"{self.from_state} -> {self.to_state} at {self.at:%Y-%m-%d %H:%M:%S}"


class PortalLink(models.Model):
    """A one-time link into a tenant's portal, and the portal session it opened.

    Only the SHA-256 of the link's token is stored. Opening the link sets ``used_at``
    (once: a conditional UPDATE) and the session lives until ``expires_at``. The session
    is known by a second random secret, drawn when the link is opened, of which only the
    SHA-256 is stored too (``session_hash``; the portal's cookie carries the secret).
    """

    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    session_hash = models.CharField(
        max_length=64, unique=True, null=True, blank=True, editable=False
    )
    tenant = models.CharField(max_length=100)
    requested_via = models.CharField(max_length=200, blank=True)
    # The API token that asked for the link (NULL: the admin, a command, or a deleted token).
    api_token = models.ForeignKey(
        ApiToken, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    # Set when the session is closed ("sign out") before it expires.
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["expires_at"], name="portal_link_expires_idx")]

    def __str__(self) -> str:
        return f"portal link #{self.pk} for {self.tenant}"


class EndpointOwner(models.Model):
    """Who sends an endpoint's requests now (see `pipeline.owner.lease_rows`).

    At most one owner holds an endpoint's lease at a time; the lease's expiry is written
    and compared with the database's clock, never a worker's. A row without a token, or
    with an expired one, has no owner.
    """

    endpoint = models.OneToOneField(
        Endpoint, primary_key=True, on_delete=models.CASCADE, related_name="owner"
    )
    token = models.UUIDField(null=True, blank=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    taken_at = models.DateTimeField(null=True, blank=True)
    # No claims before this (an open circuit, a rate limit, requests that got no answer):
    # the endpoint's due rows wait without any row being rewritten.
    not_before = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"owner of {self.endpoint_id}"


class TenantSettings(models.Model):
    """What one tenant sets for itself; a tenant without a row takes the global settings."""

    tenant = models.CharField(max_length=100, unique=True)
    # Events and attempts of this tenant are kept this many days (at most the global
    # WEBHOOKS_EVENT_RETENTION_DAYS / WEBHOOKS_ATTEMPT_RETENTION_DAYS); NULL: the global.
    retention_days = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "tenant settings"
        verbose_name_plural = "tenant settings"

    def __str__(self) -> str:
        return f"settings of {self.tenant}"


class ErasureStatus(models.TextChoices):
    RUNNING = "running", "Running"
    DONE = "done", "Done"


class TenantErasure(models.Model):
    """The erasure of one tenant's data, done in batches (deliveries/operator/erasure.py).

    ``tenant`` is kept while it runs (so a crashed run can be resumed) and cleared when it
    is done; ``counts`` (rows deleted per kind) is all that is left of the tenant.
    """

    tenant = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    status = models.CharField(
        max_length=16, choices=ErasureStatus.choices, default=ErasureStatus.RUNNING
    )
    requested_via = models.CharField(max_length=200)
    counts = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # One erasure at a time per tenant.
            models.UniqueConstraint(
                fields=["tenant"],
                condition=Q(status="running"),
                name="one_running_erasure_per_tenant",
            )
        ]

    def __str__(self) -> str:
        return f"erasure #{self.pk} ({self.status})"


class PollConsumer(models.Model):
    """A consumer group of an endpoint's feed (deliveries/polling/groups.py): its
    committed position, ``(committed_xid, committed_id)`` (see polling/positions.py)."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="poll_consumers")
    name = models.CharField(max_length=100)
    committed_xid = models.BigIntegerField(default=0)
    committed_id = models.BigIntegerField(default=0)
    committed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["endpoint_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "name"], name="poll_consumer_unique")
        ]

    def __str__(self) -> str:
        return f"consumer {self.name} of {self.endpoint_id}"


class PollLease(models.Model):
    """Messages a consumer group handed out and not yet folded into its committed
    position: the range after ``start`` up to ``end`` (positions), leased until
    ``expires_at``; committed when a member committed it."""

    consumer = models.ForeignKey(PollConsumer, on_delete=models.CASCADE, related_name="leases")
    start_xid = models.BigIntegerField()
    start_id = models.BigIntegerField()
    end_xid = models.BigIntegerField()
    end_id = models.BigIntegerField()
    count = models.PositiveIntegerField()
    expires_at = models.DateTimeField()
    committed = models.BooleanField(default=False)

    class Meta:
        ordering = ["consumer_id", "start_xid", "start_id"]

    def __str__(self) -> str:
        return f"lease of {self.count} for {self.consumer_id}"


class PollRecord(models.Model):
    """A poll that handed out messages: the attempt of a polling endpoint (kept as long
    as attempts are)."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="poll_records")
    # The consumer group's name; empty for a read with an iterator.
    consumer = models.CharField(max_length=100, blank=True)
    count = models.PositiveIntegerField()
    # The iterator asked with (empty: from the start or `after`) and the one answered.
    iterator = models.TextField(blank=True)
    next_iterator = models.TextField(blank=True)
    at = models.DateTimeField(db_default=Now(), editable=False)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["endpoint", "-at"], name="poll_record_endpoint_idx")]

    def __str__(self) -> str:
        return f"poll of {self.count} by {self.consumer or 'an iterator'}"
