"""Tenants as a whole: erase one (``DELETE /api/v1/tenants/{tenant}``, progress at
``GET /api/v1/erasures/{id}``) and its own settings (``/api/v1/tenants/{tenant}/settings``)."""

from typing import Any

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from deliveries import services
from deliveries.models import TenantErasure
from deliveries.operator.audit import token_actor
from deliveries.operator.erasure import Actor
from webhooks_core import tenants
from webhooks_core.api import scoping
from webhooks_core.api.base import ApiDefaults
from webhooks_core.api.schema import OpenApiParameter, extend_schema
from webhooks_core.api.strict import StrictTypes

TENANT_PATH = r"(?P<tenant>[A-Za-z0-9_.:-]{1,100})"

_TENANT_PARAMETER = OpenApiParameter(
    "tenant",
    str,
    OpenApiParameter.PATH,
    pattern=r"^[A-Za-z0-9_.:-]{1,100}$",
    description="The tenant id.",
)


def _tenant(value: str) -> str:
    if tenants.problem(value):  # the URL pattern already says so; kept for other hosts
        raise NotFound()
    return value


def _actor(request: Request) -> Actor:
    token = scoping.token_of(request)
    if token is None:
        return Actor(label="api")
    return Actor(label=token_actor(token), api_token_id=token.pk)


class ErasureSerializer(serializers.ModelSerializer[TenantErasure]):
    counts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Rows deleted so far, per kind (attempts, deliveries, events, payloads "
        "(offloaded files), replays, portal_links, endpoints, secrets, api_tokens).",
    )
    tenant = serializers.CharField(
        allow_null=True, help_text="While it runs; null once done (the id goes with the data)."
    )

    class Meta:
        model = TenantErasure
        fields = ["id", "tenant", "status", "counts", "created_at", "updated_at", "completed_at"]
        read_only_fields = fields


class ErasureStartedSerializer(serializers.Serializer[Any]):
    erasure = serializers.IntegerField(help_text="Its id: `GET /api/v1/erasures/{id}`.")
    status = serializers.CharField()


class TenantErase(ApiDefaults, APIView):
    """Erase every row and file of one tenant (its endpoints and their secrets, events and
    payloads, deliveries, attempts, replays, portal links, the tokens limited to it), in
    batches, in the background. Tokens limited to a tenant may not."""

    permission_classes = [*ApiDefaults.permission_classes, scoping.UnscopedTokenOnly]

    @extend_schema(
        parameters=[_TENANT_PARAMETER],
        request=None,
        responses={
            202: ErasureStartedSerializer,
            403: OpenApiResponse(description="The token is limited to a tenant."),
        },
    )
    def delete(self, request: Request, tenant: str) -> Response:
        try:
            erasure = services.tenant_erasure_start(tenant=_tenant(tenant), actor=_actor(request))
        except services.ErasureInvalid as exc:
            raise ValidationError({"tenant": [str(exc)]}) from None
        return Response(
            {"erasure": erasure.pk, "status": erasure.status}, status=status.HTTP_202_ACCEPTED
        )


class ErasureDetail(ApiDefaults, APIView):
    """The progress of a tenant's erasure."""

    permission_classes = [*ApiDefaults.permission_classes, scoping.UnscopedTokenOnly]

    @extend_schema(
        responses={
            200: ErasureSerializer,
            403: OpenApiResponse(description="The token is limited to a tenant."),
        }
    )
    def get(self, request: Request, pk: str) -> Response:
        erasure = TenantErasure.objects.filter(pk=int(pk)).first() if len(pk) < 19 else None
        if erasure is None:
            raise NotFound()
        return Response(ErasureSerializer(erasure).data)


class TenantSettingsRequestSerializer(StrictTypes, serializers.Serializer[Any]):
    retention_days = serializers.IntegerField(
        min_value=1,
        allow_null=True,
        help_text="Keep this tenant's events and delivery attempts this many days (at most "
        "WEBHOOKS_EVENT_RETENTION_DAYS: fewer than the global setting); null: the global.",
    )


class TenantSettingsSerializer(serializers.Serializer[Any]):
    tenant = serializers.CharField()
    retention_days = serializers.IntegerField(allow_null=True)
    event_retention_days = serializers.IntegerField(help_text="What applies to its events.")
    attempt_retention_days = serializers.IntegerField(help_text="What applies to its attempts.")


def _settings_answer(tenant: str, retention: services.Retention) -> Response:
    return Response(
        {
            "tenant": tenant,
            "retention_days": retention.retention_days,
            "event_retention_days": retention.event_retention_days,
            "attempt_retention_days": retention.attempt_retention_days,
        }
    )


class TenantSettingsView(ApiDefaults, APIView):
    """A tenant's own settings. A token limited to a tenant reaches its own only (403)."""

    @extend_schema(parameters=[_TENANT_PARAMETER], responses={200: TenantSettingsSerializer})
    def get(self, request: Request, tenant: str) -> Response:
        scoping.check_named_tenant(request, _tenant(tenant))
        return _settings_answer(tenant, services.tenant_retention(tenant=tenant))

    @extend_schema(
        parameters=[_TENANT_PARAMETER],
        request=TenantSettingsRequestSerializer,
        responses={
            200: TenantSettingsSerializer,
            403: OpenApiResponse(description="The token is limited to another tenant."),
        },
    )
    def put(self, request: Request, tenant: str) -> Response:
        scoping.check_named_tenant(request, _tenant(tenant))
        body = TenantSettingsRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        actor = _actor(request)
        try:
            retention = services.tenant_settings_set(
                tenant=tenant,
                retention_days=body.validated_data["retention_days"],
                actor=actor.label,
                api_token_id=actor.api_token_id,
            )
        except services.TenantSettingsInvalid as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        return _settings_answer(tenant, retention)
