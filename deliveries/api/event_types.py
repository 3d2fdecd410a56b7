"""`GET /api/v1/event-types`: the catalogue, for consumers deciding what to subscribe to."""

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from deliveries import catalogue
from webhooks_core.api.base import ApiDefaults
from webhooks_core.api.schema import extend_schema


def _describe(event_type: catalogue.EventType) -> dict[str, Any]:
    return {
        "name": event_type.name,
        "description": event_type.description,
        "newest_version": event_type.newest.number,
        "versions": [
            {"version": v.number, "schema": v.schema, "example": v.example}
            for v in event_type.versions
        ],
    }


class EventTypeVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    schema = serializers.JSONField(help_text="JSON Schema (Draft 2020-12) of `data`")
    example = serializers.JSONField()


class EventTypeSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    newest_version = serializers.IntegerField()
    versions = EventTypeVersionSerializer(many=True)


class EventTypeListSerializer(serializers.Serializer):
    results = EventTypeSerializer(many=True)


class EventTypeList(ApiDefaults, APIView):
    """Every declared event type with each version's JSON Schema of `data` and an example."""

    @extend_schema(responses={200: EventTypeListSerializer})
    def get(self, request: Request) -> Response:
        return Response({"results": [_describe(t) for t in catalogue.all_types()]})
