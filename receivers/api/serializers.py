from typing import Any

from rest_framework import serializers

from receivers import schemes
from receivers.models import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_TOLERANCE_SECONDS,
    InboxEvent,
    InboxStatus,
    Source,
    SourceSecret,
)
from webhooks_core.api.strict import BlankAsNullChoiceField, StrictTypes

MAX_SECRET_LENGTH = 1000
PUBLIC_URL_HELP = (
    "The URL the provider calls, as configured there, when a proxy stands in front (Twilio "
    "and Square sign it). An http(s) URL without query string or fragment: each request's "
    "own query string is added to it. null: the URL the request reached."
)


class BlankAsNullURLField(serializers.URLField):
    """A URL a model stores as "" when unset: served as null, taken as null or ""
    (a stored "" would be served as a value outside the schema's ``format: uri``)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_blank", not kwargs.get("read_only", False))
        super().__init__(allow_null=True, max_length=2048, help_text=PUBLIC_URL_HELP, **kwargs)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        if data is None:
            return ""
        return super().run_validation(data)

    def to_representation(self, value: Any) -> Any:
        return None if value in ("", None) else super().to_representation(value)


class SchemeField(serializers.ChoiceField):
    """A registered scheme's name (the built-in ones and the host's ``RECEIVERS_SCHEMES``).

    The choices are read from the registry whenever a serializer is made (DRF copies its
    declared fields per instance by calling ``__init__`` again), so they follow the setting.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            "The provider's signature scheme: a built-in one or one the host registered "
            "with RECEIVERS_SCHEMES.",
        )
        super().__init__(choices=schemes.choices(), **kwargs)


class SecretFingerprintSerializer(serializers.ModelSerializer):
    """A secret's identity without its value: which one is configured, until when."""

    class Meta:
        model = SourceSecret
        fields = ["fingerprint", "created_at", "expires_at"]


EXPECTED_MODE_HELP = "Events of the other mode (e.g. Stripe test events) are ignored; null: any."


class SourceSerializer(serializers.ModelSerializer):
    secret_fingerprints = SecretFingerprintSerializer(source="secrets", many=True, read_only=True)
    public_url = BlankAsNullURLField(read_only=True)
    expected_mode = BlankAsNullChoiceField(
        choices=Source._meta.get_field("expected_mode").choices,
        read_only=True,
        help_text=EXPECTED_MODE_HELP,
    )

    class Meta:
        model = Source
        fields = [
            "id",
            "slug",
            "scheme",
            "description",
            "enabled",
            "tolerance_seconds",
            "max_body_bytes",
            "expected_account",
            "expected_mode",
            "public_url",
            "secret_fingerprints",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class SourceCreatedSerializer(SourceSerializer):
    """The answer to a creation: the only time the secret is shown."""

    secret = serializers.CharField(read_only=True)

    class Meta(SourceSerializer.Meta):
        fields = [*SourceSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class SourceCreateSerializer(StrictTypes, serializers.ModelSerializer):
    slug = serializers.SlugField(max_length=100)
    expected_mode = BlankAsNullChoiceField(
        choices=Source._meta.get_field("expected_mode").choices,
        required=False,
        help_text=f'{EXPECTED_MODE_HELP} "" is taken as null.',
    )
    scheme = SchemeField()
    public_url = BlankAsNullURLField(required=False)
    secret = serializers.CharField(
        max_length=MAX_SECRET_LENGTH, required=False, allow_blank=True, write_only=True
    )
    # The bounds of the model's validators: the API and the admin refuse the same values.
    tolerance_seconds = serializers.IntegerField(
        min_value=1, max_value=3600, required=False, default=DEFAULT_TOLERANCE_SECONDS
    )
    max_body_bytes = serializers.IntegerField(
        min_value=1024,
        max_value=10 * 1024 * 1024,
        required=False,
        default=DEFAULT_MAX_BODY_BYTES,
    )

    class Meta:
        model = Source
        fields = [
            "slug",
            "scheme",
            "secret",
            "tolerance_seconds",
            "max_body_bytes",
            "description",
            "enabled",
            "expected_account",
            "expected_mode",
            "public_url",
        ]

    def validate_slug(self, value: str) -> str:
        if Source.objects.filter(slug=value).exists():
            raise serializers.ValidationError("A source with this slug already exists.")
        return value


class InboxEventSerializer(serializers.ModelSerializer):
    source = serializers.CharField(source="source.slug", read_only=True)  # type: ignore[assignment]

    class Meta:
        model = InboxEvent
        fields = [
            "id",
            "source",
            "event_id",
            "type",
            "status",
            "attempts",
            "last_error",
            "provider_timestamp",
            "received_at",
            "next_attempt_at",
            "processed_at",
        ]
        read_only_fields = fields


class InboxEventDetailSerializer(InboxEventSerializer):
    class Meta(InboxEventSerializer.Meta):
        fields = [*InboxEventSerializer.Meta.fields, "headers", "payload", "last_traceback"]
        read_only_fields = fields


class InboxFilterSerializer(serializers.Serializer):
    source = serializers.CharField(  # type: ignore[assignment]  # a field, not .source
        max_length=100, required=False, help_text="The source's slug (or its numeric id)."
    )
    status = serializers.ChoiceField(choices=InboxStatus.values, required=False)
    type = serializers.CharField(max_length=200, required=False)


class SourceDeleteSerializer(serializers.Serializer):
    force = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Delete even if inbox events of the source are not processed yet (received, "
        "retrying, processing, failed): they are deleted too, and never processed.",
    )
