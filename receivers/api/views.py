"""API views of the receiving side: validate input, call services, shape the answer."""

from typing import Any

from django.db import IntegrityError
from django.db.models import Q, QuerySet
from drf_spectacular.utils import OpenApiResponse
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from receivers import services
from receivers.api import serializers as s
from receivers.models import InboxEvent, Source
from webhooks_core.api.actions import retry_response
from webhooks_core.api.base import ApiDefaults
from webhooks_core.api.filters import validated_filters
from webhooks_core.api.pagination import NextLinkPagination
from webhooks_core.api.parsers import SafeJSONParser
from webhooks_core.api.schema import extend_schema, extend_schema_view
from webhooks_core.api.scoping import UnscopedTokenOnly
from webhooks_core.api.strict import refuse_body

PARSERS = [SafeJSONParser]
MAX_BIGINT = 2**63 - 1


class InboxPagination(NextLinkPagination):
    ordering = ("-received_at", "-pk")


SOURCE_DELETE_DOC = """Delete the source, its secrets and its inbox events, in one transaction.

Refused with 409 while inbox events of the source are not processed yet (received,
retrying, processing, or failed and waiting for a retry), unless `force=true`; refused with
409 too while records of the host's own models refer to the source. Requests the provider
sends afterwards are answered 404, as for any unknown source; one that arrives during the
deletion is stored before it (and counted) or not at all.
"""


class SourceViewSet(
    ApiDefaults,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.ListModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Inbound provider configurations. Secrets are write-only: shown once, on creation."""

    parser_classes = PARSERS
    # The receiving side belongs to no tenant: a token limited to one gets a 403.
    permission_classes = [*ApiDefaults.permission_classes, UnscopedTokenOnly]
    serializer_class = s.SourceSerializer
    # A source is named by its slug, as in its receiving URL /receivers/<slug>/.
    lookup_field = "slug"

    def get_queryset(self) -> QuerySet[Source]:
        return Source.objects.prefetch_related("secrets")

    def get_object(self) -> Source:
        value = str(self.kwargs[self.lookup_field])
        queryset = self.filter_queryset(self.get_queryset())
        source = queryset.filter(slug=value).first()
        if source is None and self.action == "retrieve" and _is_id(value):
            # GET has named a source by its numeric id since the first version: kept, for
            # reading only (a slug may be digits too, and a slug always wins).
            source = queryset.filter(pk=int(value)).first()
        if source is None:
            raise NotFound()
        self.check_object_permissions(self.request, source)
        return source

    @extend_schema(
        description=SOURCE_DELETE_DOC,
        request=None,
        parameters=[s.SourceDeleteSerializer],
        responses={
            204: OpenApiResponse(description="Deleted, with its secrets and inbox events."),
            409: OpenApiResponse(
                description="Inbox events are not processed yet (give force=true to delete "
                "them too), or the host's records refer to the source."
            ),
        },
    )
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        source = self.get_object()
        refuse_body(request.data)
        wanted = validated_filters(s.SourceDeleteSerializer, request)
        try:
            services.source_delete(source_id=source.pk, force=wanted.get("force", False))
        except Source.DoesNotExist:
            raise NotFound() from None  # deleted by a concurrent request
        except services.SourceInUse as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(status=status.HTTP_204_NO_CONTENT)

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


def _is_id(value: str) -> bool:
    return value.isascii() and value.isdigit() and int(value) <= MAX_BIGINT


def _source_matches(value: str) -> Q:
    """``?source=`` names a source by slug, as its URL does; a numeric id works too."""
    condition = Q(source__slug=value)
    if _is_id(value):
        condition |= Q(source_id=int(value))
    return condition
