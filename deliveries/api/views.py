"""HTTP API v1. Views validate input and call services; nothing else happens here."""

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from deliveries import selectors, services
from deliveries.api import serializers as s
from deliveries.endpoints import lifecycle, options, principals
from deliveries.models import Delivery, Endpoint, Event
from deliveries.polling import services as polling
from webhooks_core import tracing
from webhooks_core.api import scoping
from webhooks_core.api.actions import retry_response
from webhooks_core.api.base import ApiDefaults
from webhooks_core.api.filters import validated_filters
from webhooks_core.api.parsers import SafeJSONParser
from webhooks_core.api.schema import OpenApiParameter, extend_schema, extend_schema_view
from webhooks_core.api.strict import refuse_body

# The API speaks JSON only; anything else is answered 415.
PARSERS = [SafeJSONParser]


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get("Idempotency-Key") or None
    # Control characters (NUL above all) cannot be stored in a PostgreSQL text column.
    if key is not None and any(ord(char) < 32 or ord(char) == 127 for char in key):
        raise ValidationError({"Idempotency-Key": ["must not contain control characters"]})
    return key


def _principal(request: Request) -> principals.Principal:
    """A token limited to a tenant is that tenant, as its portal session is."""
    return principals.Principal(tenant=scoping.token_tenant(request))


def _by_tenant(request: Request, queryset: QuerySet[Any], field: str = "tenant") -> QuerySet[Any]:
    """`?tenant=acme`: only that tenant's rows (a bad id is a 400, not an empty list;
    another tenant than a scoped token's is a 403)."""
    filters = validated_filters(s.TenantFilterSerializer, request)
    if "tenant" in filters:
        scoping.check_named_tenant(request, filters["tenant"])
        return queryset.filter(**{field: filters["tenant"]})
    return queryset


@extend_schema_view(list=extend_schema(parameters=[s.TenantFilterSerializer]))
class EndpointViewSet(ApiDefaults, viewsets.ModelViewSet):
    parser_classes = PARSERS
    queryset = Endpoint.objects.all()
    serializer_class = s.EndpointSerializer
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[Endpoint]:
        queryset = scoping.scoped(self.request, Endpoint.objects.all())
        return _by_tenant(self.request, queryset) if self.action == "list" else queryset

    def perform_destroy(self, instance: Endpoint) -> None:
        services.endpoint_delete(endpoint_id=instance.pk)

    @extend_schema(
        responses={
            201: s.EndpointCreatedSerializer,
            403: OpenApiResponse(description="The body names another tenant than the token's."),
        }
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        scoping.check_body(request)
        serializer = s.EndpointSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = dict(serializer.validated_data)
        fields.pop("state", None)
        fields["tenant"] = scoping.tenant_for_write(request, fields)
        fields.setdefault("url", "")
        try:
            created = polling.endpoint_create_with_key(principal=_principal(request), **fields)
        except services.EndpointInvalid as exc:
            raise ValidationError(exc.errors) from None
        except principals.EndpointForbidden as exc:
            raise PermissionDenied(exc.errors) from None
        extra = {"secret": created.secret}
        if created.poll_key is not None:
            extra["poll_key"] = created.poll_key
        data = s.EndpointSerializer(created.endpoint, context={"request": request}).data
        return Response({**data, **extra}, status=status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # The serializer checks the shape; the service owns the rules and the write.
        endpoint = self.get_object()
        scoping.check_body(request)
        serializer = s.EndpointSerializer(
            endpoint, data=request.data, partial=kwargs.get("partial", False)
        )
        serializer.is_valid(raise_exception=True)
        try:
            endpoint = principals.endpoint_update_by(
                principal=_principal(request), endpoint=endpoint, **dict(serializer.validated_data)
            )
        except services.EndpointInvalid as exc:
            raise ValidationError(exc.errors) from None
        except principals.EndpointForbidden as exc:
            raise PermissionDenied(exc.errors) from None
        return Response(s.EndpointSerializer(endpoint, context={"request": request}).data)

    @extend_schema(request=s.RotateSecretSerializer, responses={200: s.RotatedSecretSerializer})
    @action(detail=True, methods=["post"], url_path="rotate-secret")
    def rotate_secret(self, request: Request, pk: str | None = None) -> Response:
        endpoint = self.get_object()
        # An empty body is {} here; `null` and `[]` are not an object (no `or {}`).
        body = s.RotateSecretSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        grace = body.validated_data.get("grace_seconds", lifecycle.DEFAULT_ROTATION_GRACE_SECONDS)
        secret, _ = services.endpoint_rotate_secret(endpoint=endpoint, grace_seconds=grace)
        return Response(
            {"id": str(endpoint.pk), "secret": secret, "grace_seconds": grace},
            status=status.HTTP_200_OK,
        )

    @extend_schema(request=None, responses={200: s.PollKeySerializer})
    @action(detail=True, methods=["post"], url_path="rotate-poll-key")
    def rotate_poll_key(self, request: Request, pk: str | None = None) -> Response:
        """A new consumer key (whpoll_…), shown this once; the previous one stops working.
        A push endpoint given one has a catch-up feed: what it was sent, to reconcile."""
        endpoint = self.get_object()
        refuse_body(request.data)
        key = polling.poll_key_issue(endpoint_id=endpoint.pk)
        url = request.build_absolute_uri(polling.poll_path(endpoint.pk))
        return Response({"id": str(endpoint.pk), "poll_key": key, "poll_url": url})

    @extend_schema(request=s.RotateSecretSerializer, responses={200: s.RotatedSigningKeySerializer})
    @action(detail=True, methods=["post"], url_path="rotate-signing-key")
    def rotate_signing_key(self, request: Request, pk: str | None = None) -> Response:
        endpoint = self.get_object()
        body = s.RotateSecretSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        grace = body.validated_data.get("grace_seconds", options.DEFAULT_KEY_ROTATION_GRACE_SECONDS)
        try:
            key = services.endpoint_rotate_signing_key(endpoint=endpoint, grace_seconds=grace)
        except options.NoSigningKeys as exc:
            raise ValidationError({"signature_scheme": [str(exc)]}) from None
        return Response(
            {"id": str(endpoint.pk), "public_key": key.public_key, "grace_seconds": grace},
            status=status.HTTP_200_OK,
        )

    @extend_schema(
        request=None,
        responses={
            202: s.EndpointSerializer,
            409: OpenApiResponse(description='The endpoint\'s validation is "none".'),
            429: OpenApiResponse(
                description="Asked again within WEBHOOKS_VALIDATION_MIN_INTERVAL_SECONDS of "
                "a handshake that already ran (see Retry-After); while the one asked for is "
                "still pending, the answer is 202 and no second handshake is sent."
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def validate(self, request: Request, pk: str | None = None) -> Response:
        """Run the CloudEvents handshake again (state back to pending unless validated)."""
        endpoint = self.get_object()
        refuse_body(request.data)
        try:
            endpoint = services.endpoint_request_validation(endpoint_id=endpoint.pk)
        except services.ValidationUnavailable as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except services.ValidationFolded as exc:
            # WEBHOOKS_VALIDATION_MIN_INTERVAL_SECONDS: folded into the pending handshake
            # (202), or too soon after the last one (429).
            headers = {"Retry-After": str(exc.retry_after)}
            if exc.pending:
                endpoint.refresh_from_db()
                data = s.EndpointSerializer(endpoint).data
                return Response(data, status=status.HTTP_202_ACCEPTED, headers=headers)
            return Response(
                {"detail": str(exc)}, status=status.HTTP_429_TOO_MANY_REQUESTS, headers=headers
            )
        return Response(s.EndpointSerializer(endpoint).data, status=status.HTTP_202_ACCEPTED)


# One instance validates every event's body, its fields built once: building them (a deep
# copy of each field per request) cost more than the validation. Its validation keeps no
# state between calls.
_EVENT_BODY = s.EventCreateSerializer()


def _event_body(data: Any) -> dict[str, Any]:
    try:
        return dict(_EVENT_BODY.run_validation(data))
    except ValidationError:
        # A bad body: its errors worded exactly as `is_valid` words them (`null` is "No
        # data provided"), by a serializer of its own.
        body = s.EventCreateSerializer(data=data)
        body.is_valid(raise_exception=True)
        raise


@extend_schema_view(list=extend_schema(parameters=[s.TenantFilterSerializer]))
class EventViewSet(
    ApiDefaults,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.ListModelMixin,
    viewsets.GenericViewSet,
):
    parser_classes = PARSERS
    queryset = Event.objects.all()
    serializer_class = s.EventSerializer

    def get_queryset(self) -> QuerySet[Event]:
        # Every event shows its deliveries, in the list too: one query for all of them.
        queryset = scoping.scoped(self.request, selectors.events_with_deliveries())
        return _by_tenant(self.request, queryset) if self.action == "list" else queryset

    @extend_schema(
        request=s.EventCreateSerializer,
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                # What `_idempotency_key` refuses: control characters (NUL above all); the
                # lookahead keeps a final newline out, which Python's "$" would let through.
                pattern=r"^[^\u0000-\u001f\u007f]*(?!\n)$",
            )
        ],
        responses={
            202: s.EventAcceptedSerializer,
            403: OpenApiResponse(description="The body names another tenant than the token's."),
        },
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        scoping.check_body(request)
        body = _event_body(request.data)
        key = _idempotency_key(request)
        try:
            event = services.emit(
                body["type"],
                body["data"],
                version=body.get("version"),
                occurred_at=body.get("occurred_at"),
                idempotency_key=key,
                ordering_key=body.get("ordering_key"),
                traceparent=tracing.from_header(request.headers.get("traceparent")),
                tenant=scoping.tenant_for_write(request, body),
            )
        except services.EventRefused as exc:
            field = "Idempotency-Key" if exc.field == "idempotency_key" else exc.field
            raise ValidationError({field: [exc.message]}) from None
        return Response({"id": str(event.id)}, status=status.HTTP_202_ACCEPTED)


@extend_schema_view(list=extend_schema(parameters=[s.DeliveryFilterSerializer]))
class DeliveryViewSet(
    ApiDefaults, mixins.RetrieveModelMixin, mixins.ListModelMixin, viewsets.GenericViewSet
):
    parser_classes = PARSERS
    serializer_class = s.DeliverySummarySerializer

    def get_queryset(self) -> QuerySet[Delivery]:
        queryset = scoping.scoped(self.request, Delivery.objects.all(), selectors.TENANT_FIELD)
        if self.action == "retrieve":
            return selectors.delivery_details(queryset)
        if self.action == "list":
            # Every filter the serializer let through is a value (none is blank or null).
            wanted = validated_filters(s.DeliveryFilterSerializer, self.request)
            if "tenant" in wanted:
                scoping.check_named_tenant(self.request, wanted["tenant"])
            queryset = selectors.deliveries_filtered(
                queryset,
                status=wanted.get("status"),
                endpoint_id=wanted.get("endpoint"),
                event_id=wanted.get("event"),
                event_type=wanted.get("event_type"),
                tenant=wanted.get("tenant"),
            )
        return queryset

    def get_serializer_class(self) -> type[BaseSerializer[Delivery]]:
        if self.action == "retrieve":
            return s.DeliveryDetailSerializer
        return s.DeliverySummarySerializer

    @extend_schema(
        request=None,
        responses={
            202: s.DeliverySummarySerializer,
            409: OpenApiResponse(description="The delivery cannot be retried now (see detail)."),
        },
    )
    @action(detail=True, methods=["post"])
    def retry(self, request: Request, pk: str | None = None) -> Response:
        return retry_response(
            request,
            self.get_object(),
            retry=lambda pk: services.delivery_retry(delivery_id=pk),
            not_retryable=services.DeliveryNotRetryable,
            serializer=s.DeliverySummarySerializer,
        )
