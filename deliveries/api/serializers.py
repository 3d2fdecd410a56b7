from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import URLValidator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from deliveries.destinations import broker_urls
from deliveries.destinations.http_client import client_tls
from deliveries.endpoints import auth, field_rules, headers, options
from deliveries.models import (
    Attempt,
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointState,
    EnvelopeKind,
    Event,
    SignatureScheme,
    Validation,
    ValidationState,
)
from deliveries.pipeline import payloads
from deliveries.pipeline.emit import EVENT_TYPE, MAX_TYPE_LENGTH
from webhooks_core import tenants
from webhooks_core.api.strict import StrictTypes
from webhooks_core.jsonchecks.text import unstorable_text


def _bounded(rule: field_rules.Bound) -> serializers.Field:
    # The bounds are field_rules' (the service checks them too); here they only shape
    # the schema and the message.
    if rule.kind is int:
        return serializers.IntegerField(
            min_value=int(rule.low),
            max_value=int(rule.high),
            required=False,
            allow_null=rule.nullable,
        )
    return serializers.FloatField(
        min_value=rule.low, max_value=rule.high, required=False, allow_null=rule.nullable
    )


def validate_tenant(value: str) -> None:
    problem = tenants.problem(value)
    if problem:
        raise serializers.ValidationError(problem)


# What `tenants.problem` checks, for the schema; the lookahead keeps a final newline out
# (Python's "$" also matches before one; the server refuses it).
TENANT_PATTERN = r"^[A-Za-z0-9_.:-]+(?!\n)$"


def tenant_field() -> serializers.CharField:
    return serializers.RegexField(
        TENANT_PATTERN,
        min_length=1,
        max_length=tenants.MAX_LENGTH,
        required=False,
        allow_null=True,
        trim_whitespace=False,
        validators=[validate_tenant],
        help_text="The customer this belongs to: 1-100 characters of [A-Za-z0-9_.:-]. "
        "An event with a tenant goes to that tenant's endpoints only.",
    )


@extend_schema_field(
    {
        "type": "string",
        "format": "uri",
        "maxLength": field_rules.URL_MAX_LENGTH,
        "pattern": "^([Hh][Tt][Tt][Pp][Ss]?|[Aa][Mm][Qq][Pp][Ss]?|[Nn][Aa][Tt][Ss]"
        "|[Rr][Ee][Dd][Ii][Ss][Ss]?)://",
        "description": "An http(s) URL as Django's URLValidator takes it (a host name with a "
        "domain, `localhost` or an IP address), without user info, backslashes, white space "
        "or ambiguous host and port forms, whose host does not resolve to a refused "
        "network (the SSRF guard; https only with WEBHOOKS_REQUIRE_HTTPS). Or a broker "
        "destination: `amqp(s)://[user:password@]host[:port][/vhost]?exchange=…"
        "[&routing_key=…]`, `nats://[user:password@]host[:port]?subject=…`, "
        "`redis(s)://[[user]:password@]host[:port][/db]?stream=…[&maxlen=…]`; the password "
        f"is stored encrypted and shown as {broker_urls.MASK!r} (sending that back keeps it).",
    }
)
class EndpointURLField(serializers.CharField):
    """The schema says what `endpoint_create` checks (the rules live there, in ssrf and
    in broker_urls); http(s) URLs are also read as Django's URLValidator reads them."""

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not broker_urls.is_broker_url(value):
            try:
                URLValidator()(value)
            except DjangoValidationError:
                raise serializers.ValidationError("Enter a valid URL.") from None
        return value


@extend_schema_field(
    {
        "type": "object",
        "maxProperties": headers.MAX_HEADERS,
        "additionalProperties": {
            "type": "string",
            "maxLength": headers.MAX_VALUE_LENGTH,
            # RFC 9110's field-value in Latin-1, without C1 controls (deliveries.endpoints.headers).
            "pattern": "^(?:[\\u0021-\\u007e\\u00a0-\\u00ff]"
            "(?:[\\u0009\\u0020-\\u007e\\u00a0-\\u00ff]*[\\u0021-\\u007e\\u00a0-\\u00ff])?)?$",
        },
        "description": "{name: value} added to every request. In answers the value of a "
        f"secret header is {headers.MASK!r}; sending that back keeps the stored value. "
        "Names are HTTP tokens, unique ignoring case, not one the sender sets itself "
        "(framing, routing, signing).",
    }
)
class CustomHeadersField(serializers.DictField):
    """The schema says what `deliveries.endpoints.headers` checks (the rules live there)."""


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "additionalProperties": True,
        "description": 'Payload filter, e.g. {"data.amount": {"$gte": 100}}; null: no filter. '
        "A JSON object (its operators: the filters page).",
    }
)
class PayloadFilterField(serializers.JSONField):
    """The schema says what `payload_filters` takes at the top: an object (or null)."""


# Text without control characters (C0 and DEL).
_NO_CONTROL = "^[^\\u0000-\\u001f\\u007f]*$"


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "required": ["type", "token_url", "client_id"],
        "additionalProperties": False,
        "properties": {
            "type": {"type": "string", "enum": ["oauth2_client_credentials"]},
            "token_url": {
                "type": "string",
                "format": "uri",
                "minLength": 1,
                "maxLength": 2048,
                "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://[^\\u0000-\\u0020\\u007f]*$",
                "description": "Passes the SSRF guard, as the endpoint's url does.",
            },
            "client_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": 2048,
                "pattern": _NO_CONTROL,
            },
            "client_secret": {
                "type": "string",
                "maxLength": 2048,
                "writeOnly": True,
                "description": "Write-only, stored encrypted. Required when no secret is "
                "stored; left out (or empty) on an update: the stored one is kept, unless "
                "token_url or url moves to another origin.",
            },
            "scope": {"type": "string", "maxLength": 2048, "pattern": _NO_CONTROL},
            "audience": {"type": "string", "maxLength": 2048, "pattern": _NO_CONTROL},
        },
        "description": "Delivery auth: OAuth2 client credentials (RFC 6749 4.4); every "
        "request carries `Authorization: Bearer <token>`. null: none.",
    }
)
class EndpointAuthField(serializers.JSONField):
    """The schema says what `endpoints.auth` checks (the rules live there)."""


class EndpointSerializer(StrictTypes, serializers.ModelSerializer):
    url = EndpointURLField(max_length=field_rules.URL_MAX_LENGTH)
    # Set on creation only (the service refuses a change).
    tenant = tenant_field()
    event_types = serializers.ListField(
        child=serializers.CharField(
            max_length=field_rules.FILTER_MAX_LENGTH,
            allow_blank=False,
            trim_whitespace=False,
        ),
        allow_empty=False,
        min_length=1,  # what allow_empty says, in a form the schema shows (minItems)
        max_length=field_rules.MAX_FILTERS,
    )
    state = serializers.ChoiceField(choices=EndpointState.choices, required=False)
    custom_headers = CustomHeadersField(
        child=serializers.CharField(
            max_length=headers.MAX_VALUE_LENGTH, allow_blank=True, trim_whitespace=False
        ),
        required=False,
    )
    secret_headers = serializers.ListField(
        child=serializers.CharField(max_length=field_rules.HEADER_NAME_MAX_LENGTH),
        required=False,
        max_length=headers.MAX_HEADERS,
        help_text="Names of custom headers stored encrypted and masked on every read. "
        "Credential-like names (Authorization, X-Api-Key, …token…, …secret…) always are.",
    )
    version_pins = serializers.DictField(
        child=serializers.IntegerField(min_value=1, max_value=field_rules.MAX_VERSION_PIN),
        required=False,
        help_text="{event type: version}; unpinned declared types the filters match are "
        "pinned to their newest version when the endpoint is created or its filters change.",
    )
    ordered_delivery = serializers.BooleanField(required=False)
    filter = PayloadFilterField(
        required=False,
        allow_null=True,
        help_text='Payload filter, e.g. {"data.amount": {"$gte": 100}}; null: no filter.',
    )
    signature_scheme = serializers.ChoiceField(
        choices=SignatureScheme.choices,
        required=False,
        help_text='"v1" (HMAC, default), "v1a" (ed25519) or "v1,v1a" in webhook-signature.',
    )
    envelope = serializers.ChoiceField(
        choices=EnvelopeKind.choices,
        required=False,
        help_text='"default" or "cloudevents" (CloudEvents 1.0 structured JSON).',
    )
    auth = EndpointAuthField(required=False, allow_null=True)
    client_certificate = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=client_tls.MAX_PEM_CHARS,
        help_text="Mutual TLS: the client certificate (PEM, its chain after it); empty: none.",
    )
    client_key = serializers.CharField(
        required=False,
        allow_blank=True,
        write_only=True,
        trim_whitespace=False,
        max_length=client_tls.MAX_PEM_CHARS,
        help_text="Mutual TLS: the certificate's private key (PEM, not encrypted). "
        "Write-only, stored encrypted; left out on an update, the stored one is kept.",
    )
    has_client_key = serializers.SerializerMethodField(
        help_text="Whether a client key is stored (it is never shown)."
    )
    ca_certificates = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=client_tls.MAX_CA_PEM_CHARS,
        help_text="PEM CA certificates that replace the system CAs for this endpoint "
        "(a private CA); empty: the system CAs.",
    )
    validation = serializers.ChoiceField(
        choices=Validation.choices,
        required=False,
        help_text='"none" (default) or "cloudevents": nothing is sent until the target '
        "consents through the CloudEvents webhook handshake (OPTIONS), again after every "
        "change of the URL.",
    )
    validation_state = serializers.ChoiceField(
        choices=ValidationState.choices,
        read_only=True,
        allow_null=True,
        help_text='"pending", "validated" or "refused" with validation "cloudevents" '
        '(deliveries wait unless validated); null with "none".',
    )
    validation_reason = serializers.CharField(
        read_only=True, help_text="What the last handshake came to (why it was refused)."
    )
    validation_allowed_rate = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="Requests per minute the target granted (WebHook-Allowed-Rate); it "
        "applies besides rate_limit_per_second. null: no limit granted.",
    )
    public_key = serializers.SerializerMethodField(
        help_text="The whpk_ key that verifies v1a signatures (the newest unexpired); null "
        "without v1a."
    )
    notices = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="What this write did besides the change asked, e.g. the secret headers a "
        "change of the URL's origin removed; empty on reads.",
    )

    class Meta:
        model = Endpoint
        fields = [
            "id",
            "url",
            "tenant",
            "description",
            "owner_email",
            "event_types",
            "state",
            "state_reason",
            "state_changed_at",
            "max_attempts",
            "backoff_base_seconds",
            "backoff_max_seconds",
            "retry_window_seconds",
            "connect_timeout_seconds",
            "read_timeout_seconds",
            "custom_headers",
            "secret_headers",
            "version_pins",
            "ordered_delivery",
            "filter",
            "signature_scheme",
            "envelope",
            "auth",
            "client_certificate",
            "client_key",
            "has_client_key",
            "ca_certificates",
            "validation",
            "validation_state",
            "validation_reason",
            "validation_checked_at",
            "validation_allowed_rate",
            "public_key",
            "suspend_after_failures",
            "suspend_window_seconds",
            "max_in_flight",
            "rate_limit_per_second",
            "consecutive_failures",
            "last_success_at",
            "last_failure_at",
            "circuit_state",
            "circuit_changed_at",
            "created_at",
            "updated_at",
            "notices",
        ]
        # What only the system sets, and what this serializer computes.
        read_only_fields = [*field_rules.READ_ONLY, "public_key", "has_client_key", "notices"]

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        # The numeric settings (retries, timeouts, health and isolation; null takes the
        # global WEBHOOKS_* default), each where Meta.fields puts it.
        fields.update({rule.name: _bounded(rule) for rule in field_rules.NUMERIC})
        return fields

    @extend_schema_field({"type": "string", "nullable": True})
    def get_public_key(self, endpoint: Endpoint) -> str | None:
        return options.endpoint_public_key(endpoint=endpoint)

    @extend_schema_field({"type": "boolean"})
    def get_has_client_key(self, endpoint: Endpoint) -> bool:
        return bool(endpoint.encrypted_client_key)

    def validate_url(self, value: str) -> str:
        if not value.lower().startswith(("http://", "https://")) and not (
            broker_urls.is_broker_url(value)
        ):
            kinds = ", ".join((*broker_urls.HTTP_SCHEMES, *broker_urls.SCHEMES))
            raise serializers.ValidationError(f"Only {kinds} URLs can receive webhooks.")
        return value

    def to_representation(self, instance: Endpoint) -> dict[str, Any]:
        data = super().to_representation(instance)
        # Every read masks the credentials among the custom headers.
        data["custom_headers"] = instance.custom_headers_masked()
        data["secret_headers"] = instance.secret_header_names
        # Never a client secret or key: the auth fields as any reader may see them.
        data.update(auth.represent(instance))
        return data


class EndpointCreatedSerializer(EndpointSerializer):
    secret = serializers.CharField(read_only=True)

    class Meta(EndpointSerializer.Meta):
        fields = [*EndpointSerializer.Meta.fields, "secret"]


class RotatedSigningKeySerializer(serializers.Serializer):
    id = serializers.UUIDField(read_only=True)
    public_key = serializers.CharField(read_only=True)
    grace_seconds = serializers.IntegerField(read_only=True)


class RotateSecretSerializer(StrictTypes, serializers.Serializer):
    grace_seconds = serializers.IntegerField(
        min_value=0, max_value=field_rules.MAX_ROTATION_GRACE_SECONDS, required=False
    )


# Event.version is a PostgreSQL integer: a larger value would fail in the database (500).
MAX_EVENT_VERSION = 2**31 - 1


@extend_schema_field(
    {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_TYPE_LENGTH,
        "pattern": EVENT_TYPE.pattern.replace("\\A", "^").replace("\\Z", "$"),
        "description": "A declared event type (`GET /api/v1/event-types`).",
    }
)
class EventTypeNameField(serializers.CharField):
    """The schema says what `emit` checks (the rule itself lives there)."""


@extend_schema_field(
    {
        "description": "Any JSON that validates against the JSON Schema of the type's "
        "newest version (`GET /api/v1/event-types`). Strings, keys included, cannot "
        "contain U+0000 or unpaired surrogates (PostgreSQL's jsonb refuses them)."
    }
)
class EventDataField(serializers.JSONField):
    pass


class EventCreateSerializer(StrictTypes, serializers.Serializer):
    type = EventTypeNameField(max_length=MAX_TYPE_LENGTH, trim_whitespace=False)
    data = EventDataField()  # type: ignore[assignment]  # a field, not .data
    # Absent: the newest declared version (1 for an undeclared type, when they are allowed).
    version = serializers.IntegerField(min_value=1, max_value=MAX_EVENT_VERSION, required=False)
    occurred_at = serializers.DateTimeField(required=False)
    ordering_key = serializers.CharField(max_length=255, required=False)
    tenant = tenant_field()

    def validate_data(self, value: Any) -> Any:
        problem = unstorable_text(value)
        if problem:
            raise serializers.ValidationError(f"A string in data {problem}.")
        return value


class EventAcceptedSerializer(serializers.Serializer):
    id = serializers.UUIDField(read_only=True)


class RotatedSecretSerializer(serializers.Serializer):
    id = serializers.UUIDField(read_only=True)
    secret = serializers.CharField(read_only=True)
    grace_seconds = serializers.IntegerField(read_only=True)


class DeliverySummarySerializer(serializers.ModelSerializer):
    endpoint_id = serializers.UUIDField(read_only=True)
    event_id = serializers.UUIDField(read_only=True)
    attempt_count = serializers.IntegerField(source="attempts", read_only=True)

    class Meta:
        model = Delivery
        fields = [
            "id",
            "event_id",
            "endpoint_id",
            "status",
            "is_replay",
            "attempt_count",
            "next_attempt_at",
            "last_status_code",
            "last_error",
            "created_at",
            "completed_at",
        ]


class EventSerializer(serializers.ModelSerializer):
    deliveries = DeliverySummarySerializer(many=True, read_only=True)
    data = serializers.SerializerMethodField()  # type: ignore[assignment]  # a field, not .data

    @extend_schema_field(OpenApiTypes.ANY)
    def get_data(self, event: Event) -> Any:
        # Offloaded data is read back from storage; an unreadable file shows as null
        # (the deliveries' last_error says why) rather than failing the whole answer.
        try:
            return payloads.load(event)
        except payloads.PayloadUnavailable:
            return None

    class Meta:
        model = Event
        fields = [
            "id",
            "type",
            "version",
            "occurred_at",
            "data",
            "ordering_key",
            "tenant",
            "created_at",
            "deliveries",
        ]


class AttemptSerializer(serializers.ModelSerializer):
    class Meta:
        model = Attempt
        fields = [
            "number",
            "started_at",
            "duration_ms",
            "request_headers",
            "response_status",
            "response_body",
            "error",
        ]


class DeliveryDetailSerializer(DeliverySummarySerializer):
    event_type = serializers.CharField(source="event.type", read_only=True)
    attempts = AttemptSerializer(source="attempt_set", many=True, read_only=True)

    class Meta(DeliverySummarySerializer.Meta):
        fields = [*DeliverySummarySerializer.Meta.fields, "event_type", "attempts"]


class TenantFilterSerializer(serializers.Serializer):
    tenant = serializers.RegexField(
        TENANT_PATTERN,
        min_length=1,
        max_length=tenants.MAX_LENGTH,
        required=False,
        trim_whitespace=False,
        validators=[validate_tenant],
        help_text="Only this tenant's.",
    )


class DeliveryFilterSerializer(TenantFilterSerializer):
    status = serializers.ChoiceField(choices=DeliveryStatus.values, required=False)
    endpoint = serializers.UUIDField(required=False)
    event_type = serializers.CharField(max_length=200, required=False)
    event = serializers.UUIDField(required=False)
