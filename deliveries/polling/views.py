"""The consumer API (``/api/v1/poll/{endpoint_id}``): read with the endpoint's poll key.
Views check input and call `services`; the rules live there."""

from typing import Any

from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from deliveries.models import Endpoint
from deliveries.pipeline.payloads import PayloadUnavailable
from deliveries.polling import params, services, waiters
from deliveries.polling.authentication import PollKeyAuthentication
from webhooks_core.api.base import ApiDefaults
from webhooks_core.api.schema import OpenApiParameter, extend_schema


class Gone(exceptions.APIException):
    status_code = status.HTTP_410_GONE
    default_code = "gone"


class Unavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "unavailable"


_MESSAGE = inline_serializer(
    "PollMessage",
    {
        "id": serializers.UUIDField(help_text="The event's id (the webhook-id of a push)."),
        "type": serializers.CharField(),
        "timestamp": serializers.DateTimeField(help_text="The event's occurred_at."),
        "payload": serializers.JSONField(help_text="The body a push would send, as JSON."),
        "body": serializers.CharField(help_text="That body exactly as a push sends it."),
        "headers": serializers.DictField(
            child=serializers.CharField(),
            help_text="The signature headers a push of this body would carry, signed now.",
        ),
    },
)
_PAGE = inline_serializer(
    "PollPage",
    {
        "data": serializers.ListField(child=_MESSAGE),
        "iterator": serializers.CharField(),
        "done": serializers.BooleanField(),
    },
)
_POSITION = inline_serializer("PollPosition", {"iterator": serializers.CharField()})
_ERRORS = {
    400: OpenApiResponse(description="A malformed iterator or parameter."),
    401: OpenApiResponse(description="No key, or an unknown or rotated one."),
    403: OpenApiResponse(description="An API token instead of a poll key."),
    404: OpenApiResponse(description="Another endpoint than the key's."),
}


class PollView(ApiDefaults, APIView):
    authentication_classes = [PollKeyAuthentication]
    permission_classes = [IsAuthenticated]

    def endpoint(self, request: Request, endpoint_id: str) -> Endpoint:
        endpoint = request.auth
        if not isinstance(endpoint, Endpoint):
            raise exceptions.NotAuthenticated()
        if str(endpoint.pk) != endpoint_id.lower():
            raise exceptions.NotFound("No such endpoint for this key.")
        return endpoint

    def read(self, request: Request, endpoint: Endpoint, wait: float, read: Any) -> Response:
        try:
            page = services.long_poll(
                read, endpoint_id=endpoint.pk, key=endpoint.poll_key_hash, wait=wait
            )
        except waiters.TooManyWaits as exc:
            raise exceptions.Throttled(wait=exc.retry_after, detail=str(exc)) from None
        except services.InvalidIterator as exc:
            raise exceptions.ValidationError({"iterator": [str(exc)]}) from None
        except services.IteratorExpired as exc:
            raise Gone(str(exc)) from None
        except services.NoSigningSecret:
            raise exceptions.PermissionDenied(
                "The endpoint has no unexpired signing secret: rotate its secret."
            ) from None
        except PayloadUnavailable:
            raise Unavailable("An event's data cannot be read now; try again.") from None
        return Response({"data": page.data, "iterator": page.iterator, "done": page.done})


def _query(request: Request, *, group: bool) -> params.ReadParams:
    try:
        return params.read_params(request.query_params, group=group)
    except params.InvalidParams as exc:
        raise exceptions.ValidationError(exc.errors) from None


def _name(name: str) -> str:
    problem = params.name_problem(name)
    if problem:
        raise exceptions.ValidationError({"name": [problem]})
    return name


def _body(request: Request, allowed: set[str]) -> dict[str, Any]:
    data = request.data
    if not isinstance(data, dict):
        raise exceptions.ValidationError({"detail": ["The body must be a JSON object."]})
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise exceptions.ValidationError({name: ["Unknown field."] for name in unknown})
    for name, value in data.items():
        if not isinstance(value, str):
            raise exceptions.ValidationError({name: ["Must be a string."]})
    key = request.headers.get("Idempotency-Key")
    if key is not None and any(ord(char) < 32 or ord(char) == 127 for char in key):
        raise exceptions.ValidationError({"Idempotency-Key": ["No control characters."]})
    return dict(data)


class FeedView(PollView):
    @extend_schema(
        operation_id="poll_read",
        parameters=[
            OpenApiParameter("iterator", str, description="Where the last read ended."),
            OpenApiParameter("after", str, description="RFC 3339: start after this time."),
            OpenApiParameter("limit", int, description="1-250, default 50."),
            OpenApiParameter("wait", float, description="0-30 s: long polling."),
        ],
        responses={200: _PAGE, **_ERRORS, 410: OpenApiResponse(description="Expired.")},
    )
    def get(self, request: Request, endpoint_id: str) -> Response:
        """The messages after an iterator, oldest first."""
        endpoint = self.endpoint(request, endpoint_id)
        query = _query(request, group=False)
        return self.read(
            request,
            endpoint,
            query.wait,
            lambda: services.feed_read(
                endpoint=endpoint, iterator=query.iterator, after=query.after, limit=query.limit
            ),
        )


class ConsumerView(PollView):
    @extend_schema(
        operation_id="poll_consumer_read",
        parameters=[
            OpenApiParameter("limit", int, description="1-250, default 50."),
            OpenApiParameter("lease", float, description="1-300 s, default 30."),
            OpenApiParameter("wait", float, description="0-30 s: long polling."),
        ],
        responses={200: _PAGE, **_ERRORS},
    )
    def get(self, request: Request, endpoint_id: str, name: str) -> Response:
        """The consumer group's next messages, leased to this member."""
        endpoint = self.endpoint(request, endpoint_id)
        query = _query(request, group=True)
        _name(name)
        return self.read(
            request,
            endpoint,
            query.wait,
            lambda: services.group_read(
                endpoint=endpoint, name=name, limit=query.limit, lease_seconds=query.lease
            ),
        )


class CommitView(PollView):
    @extend_schema(
        operation_id="poll_consumer_commit",
        request=_POSITION,
        responses={200: _POSITION, **_ERRORS},
    )
    def post(self, request: Request, endpoint_id: str, name: str) -> Response:
        """Commit what a read of the group handed out (idempotent)."""
        endpoint = self.endpoint(request, endpoint_id)
        _name(name)
        body = _body(request, {"iterator"})
        if not body.get("iterator"):
            raise exceptions.ValidationError({"iterator": ["This field is required."]})
        try:
            committed = services.group_commit(
                endpoint=endpoint, name=name, iterator=body["iterator"]
            )
        except services.InvalidIterator as exc:
            raise exceptions.ValidationError({"iterator": [str(exc)]}) from None
        return Response({"iterator": committed})


class SeekView(PollView):
    @extend_schema(
        operation_id="poll_consumer_seek",
        request=inline_serializer(
            "PollSeek", {"iterator": serializers.CharField(), "after": serializers.CharField()}
        ),
        responses={200: _POSITION, **_ERRORS},
    )
    def post(self, request: Request, endpoint_id: str, name: str) -> Response:
        """Move the group to an iterator or a time (backwards too)."""
        endpoint = self.endpoint(request, endpoint_id)
        _name(name)
        body = _body(request, {"iterator", "after"})
        if bool(body.get("iterator")) == bool(body.get("after")):
            raise exceptions.ValidationError({"detail": ["Give either iterator or after."]})
        after = None
        if body.get("after"):
            try:
                after = params.parse_time(body["after"])
            except ValueError as exc:
                raise exceptions.ValidationError({"after": [str(exc)]}) from None
        try:
            position = services.group_seek(
                endpoint=endpoint, name=name, iterator=body.get("iterator"), after=after
            )
        except services.InvalidIterator as exc:
            raise exceptions.ValidationError({"iterator": [str(exc)]}) from None
        return Response({"iterator": position})
