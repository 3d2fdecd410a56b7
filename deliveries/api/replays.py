"""`POST /api/v1/replays`: the replay console over HTTP (preview with `dry_run`)."""

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from deliveries import services
from deliveries.api.serializers import tenant_field
from deliveries.models import Replay
from deliveries.pipeline import event_types
from webhooks_core.api import scoping
from webhooks_core.api.base import ApiDefaults
from webhooks_core.api.parsers import SafeJSONParser
from webhooks_core.api.schema import extend_schema
from webhooks_core.api.strict import StrictTypes


# Named for the schema: the body of a request to create a replay.
@extend_schema_serializer(component_name="ReplayCreate")
class ReplayRequestSerializer(StrictTypes, serializers.Serializer[Any]):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    event_types = serializers.ListField(
        child=serializers.CharField(max_length=200, trim_whitespace=False),
        required=False,
        default=list,
        max_length=100,
    )
    endpoint_ids = serializers.ListField(
        child=serializers.UUIDField(), required=False, default=list, max_length=1000
    )
    tenant = tenant_field()
    dry_run = serializers.BooleanField(required=False, default=False)

    def validate_event_types(self, value: list[str]) -> list[str]:
        for pattern in value:
            problem = event_types.validate_filter(pattern)
            if problem:
                raise serializers.ValidationError(problem)
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["since"] >= attrs["until"]:
            raise serializers.ValidationError({"until": ["must be after since"]})
        return attrs


class ReplayPreviewSerializer(serializers.Serializer[Any]):
    dry_run = serializers.BooleanField()
    events = serializers.IntegerField()
    deliveries = serializers.IntegerField()
    endpoints = serializers.IntegerField()


class ReplaySerializer(serializers.ModelSerializer[Replay]):
    class Meta:
        model = Replay
        fields = [
            "id",
            "requested_via",
            "since",
            "until",
            "event_types",
            "endpoint_ids",
            "tenant",
            "status",
            "expected_deliveries",
            "events_done",
            "deliveries_created",
            "created_at",
            "completed_at",
        ]
        read_only_fields = fields


class ReplayViewSet(
    ApiDefaults, mixins.RetrieveModelMixin, mixins.ListModelMixin, viewsets.GenericViewSet
):
    parser_classes = [SafeJSONParser]
    queryset = Replay.objects.all()
    serializer_class = ReplaySerializer

    def get_queryset(self) -> Any:
        return scoping.scoped(self.request, Replay.objects.all())

    @extend_schema(
        request=ReplayRequestSerializer,
        responses={
            200: ReplayPreviewSerializer,
            202: ReplaySerializer,
            403: OpenApiResponse(description="The body names another tenant than the token's."),
        },
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        scoping.check_body(request)
        body = ReplayRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        filters = services.ReplayFilters(
            since=data["since"],
            until=data["until"],
            event_types=tuple(data["event_types"]),
            endpoint_ids=tuple(data["endpoint_ids"]),
            tenant=scoping.tenant_for_write(request, data),
        )
        try:
            if data["dry_run"]:
                preview = services.replay_preview(filters=filters)
                return Response(
                    {
                        "dry_run": True,
                        "events": preview.events,
                        "deliveries": preview.deliveries,
                        "endpoints": preview.endpoints,
                    }
                )
            replay, preview = services.replay_create(
                filters=filters, requested_via=f"api token: {getattr(request.user, 'name', '?')}"
            )
        except services.ReplayInvalid as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        payload = {
            **ReplaySerializer(replay).data,
            "dry_run": False,
            "events": preview.events,
            "deliveries": preview.deliveries,
            "endpoints": preview.endpoints,
        }
        return Response(payload, status=status.HTTP_202_ACCEPTED)
