"""API views of the receiving side: validate input, call services, shape the answer."""

from typing import Any

from django.db import IntegrityError
from django.db.models import Q, QuerySet
from drf_spectacular.utils import OpenApiResponse
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from webhooks_core.api.actions import retry_response
from webhooks_core.api.base import ApiDefaults
from webhooks_core.api.filters import validated_filters
from webhooks_core.api.pagination import NextLinkPagination
from webhooks_core.api.parsers import SafeJSONParser
from webhooks_core.api.schema import extend_schema, extend_schema_view
from webhooks_core.api.scoping import UnscopedTokenOnly

from .. import services
from ..models import InboxEvent, Source
from . import serializers as s

PARSERS = [SafeJSONParser]
MAX_BIGINT = 2**63 - 1


class InboxPagination(NextLinkPagination):
    ordering = ("-received_at", "-pk")


class SourceViewSet(
    ApiDefaults,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.ListModelMixin,
    viewsets.GenericViewSet,
):
    """Inbound provider configurations. Secrets are write-only: shown once, on creation."""

    parser_classes = PARSERS
    # The receiving side belongs to no tenant: a token limited to one gets a 403.
    permission_classes = [*ApiDefaults.permission_classes, UnscopedTokenOnly]
    serializer_class = s.SourceSerializer

    def get_queryset(self) -> QuerySet[Source]:
        return Source.objects.prefetch_related("secrets")

    @extend_schema(request=s.SourceCreateSerializer, responses={201: s.SourceCreatedSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = s.SourceCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        try:
            source, secret = services.source_create(
                slug=fields.pop("slug"),
                scheme=fields.pop("scheme"),
                secret=fields.pop("secret", None) or None,
                **fields,
            )
        except (services.SecretRequired, services.InvalidSecret) as exc:
            raise ValidationError({"secret": [str(exc)]}) from None
        except services.SourceInvalid as exc:
            raise ValidationError(exc.errors) from None
        except IntegrityError:
            # Another request created the same slug between the check and the insert.
            raise ValidationError({"slug": ["A source with this slug already exists."]}) from None
        data = s.SourceSerializer(source).data
        return Response({**data, "secret": secret}, status=status.HTTP_201_CREATED)


@extend_schema_view(list=extend_schema(parameters=[s.InboxFilterSerializer]))
class InboxViewSet(
    ApiDefaults, mixins.RetrieveModelMixin, mixins.ListModelMixin, viewsets.GenericViewSet
):
    """The inbox: what providers delivered, and how its processing went."""

    parser_classes = PARSERS
    permission_classes = [*ApiDefaults.permission_classes, UnscopedTokenOnly]
    pagination_class = InboxPagination
    serializer_class = s.InboxEventSerializer

    def get_queryset(self) -> QuerySet[InboxEvent]:
        queryset = InboxEvent.objects.select_related("source")
        if self.action != "list":
            return queryset
        wanted = validated_filters(s.InboxFilterSerializer, self.request)
        if "source" in wanted:
            queryset = queryset.filter(_source_matches(wanted["source"]))
        if "status" in wanted:
            queryset = queryset.filter(status=wanted["status"])
        if "type" in wanted:
            queryset = queryset.filter(type=wanted["type"])
        # The list never ships bodies, payloads or tracebacks: keep them in the database.
        return queryset.defer("raw_body", "payload", "headers", "last_traceback")

    def get_serializer_class(self) -> type[BaseSerializer[InboxEvent]]:
        if self.action == "retrieve":
            return s.InboxEventDetailSerializer
        return s.InboxEventSerializer

    @extend_schema(
        request=None,
        responses={
            202: s.InboxEventSerializer,
            409: OpenApiResponse(description="The event is being processed; try again later."),
        },
    )
    @action(detail=True, methods=["post"])
    def retry(self, request: Request, pk: str | None = None) -> Response:
        return retry_response(
            request,
            self.get_object(),
            retry=lambda pk: services.inbox_retry(inbox_id=pk),
            not_retryable=services.InboxNotRetryable,
            serializer=s.InboxEventSerializer,
        )


def _source_matches(value: str) -> Q:
    """``?source=`` names a source by slug, as its URL does; a numeric id works too."""
    condition = Q(source__slug=value)
    if value.isascii() and value.isdigit() and int(value) <= MAX_BIGINT:
        condition |= Q(source_id=int(value))
    return condition
