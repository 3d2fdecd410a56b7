"""`POST /api/v1/portal-sessions`: a one-time link into one tenant's portal."""

from typing import Any

from django.urls import NoReverseMatch, reverse
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from deliveries import conf, services
from deliveries.api.serializers import TENANT_PATTERN, validate_tenant
from deliveries.portal.links import DEFAULT_EXPIRES_IN, MAX_EXPIRES_IN
from webhooks_core import tenants
from webhooks_core.api import scoping
from webhooks_core.api.base import ApiDefaults
from webhooks_core.api.schema import extend_schema
from webhooks_core.api.strict import StrictTypes


class PortalSessionRequestSerializer(StrictTypes, serializers.Serializer[Any]):
    tenant = serializers.RegexField(
        TENANT_PATTERN,
        min_length=1,
        max_length=tenants.MAX_LENGTH,
        trim_whitespace=False,
        validators=[validate_tenant],
    )
    expires_in = serializers.IntegerField(
        min_value=1,
        max_value=MAX_EXPIRES_IN,
        default=DEFAULT_EXPIRES_IN,
        help_text="Seconds the link (and the session it opens) stays valid.",
    )


class PortalSessionSerializer(serializers.Serializer[Any]):
    url = serializers.URLField(help_text="Absolute, one-time link; send it to the tenant.")
    expires_at = serializers.DateTimeField()


def _link_path(token: str) -> str:
    return reverse("webhooks_portal:open", args=[token])


class PortalSessionCreate(ApiDefaults, APIView):
    """Issue a one-time portal link for a tenant (shown once: only its hash is stored)."""

    @extend_schema(
        request=PortalSessionRequestSerializer,
        responses={
            201: PortalSessionSerializer,
            403: OpenApiResponse(description="The token is limited to another tenant."),
        },
    )
    def post(self, request: Request) -> Response:
        scoping.check_body(request)
        # A token limited to a tenant may leave the tenant out: its own.
        body = PortalSessionRequestSerializer(data=scoping.with_token_tenant(request))
        body.is_valid(raise_exception=True)
        try:
            _link_path("any-token")  # is the portal mounted at all?
        except NoReverseMatch:
            return Response(
                {"detail": 'The portal is not mounted: include("deliveries.portal.urls").'},
                status=status.HTTP_501_NOT_IMPLEMENTED,
            )
        try:
            link, token = services.portal_link_create(
                tenant=body.validated_data["tenant"],
                expires_in=body.validated_data["expires_in"],
                requested_via=f"api token: {getattr(request.user, 'name', '?')}",
                api_token=scoping.token_of(request),
            )
        except services.PortalLinkForbidden as exc:
            raise scoping.TenantForbidden(str(exc)) from None
        except services.PortalLinkInvalid as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        base = conf.portal().base_url.rstrip("/")
        path = _link_path(token)
        url = f"{base}{path}" if base else request.build_absolute_uri(path)
        payload = PortalSessionSerializer({"url": url, "expires_at": link.expires_at}).data
        response = Response(payload, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"
        return response
