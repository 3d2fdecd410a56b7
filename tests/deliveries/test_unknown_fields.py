"""Unknown fields are refused (a misspelt field must not be dropped silently): a 400 naming
each one, on every write of the API, nested objects included; the schema says
``additionalProperties: false``; read-only fields sent back unchanged are accepted."""

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework import serializers
from rest_framework.test import APIClient

from deliveries.models import Endpoint
from webhooks_core.api.strict import StrictTypes

pytestmark = pytest.mark.django_db

ENDPOINT = {"url": "https://receiver.example.com/hooks", "event_types": ["invoice.paid"]}


def send(api: APIClient, method: str, path: str, payload: Any) -> Any:
    return getattr(api, method)(path, data=json.dumps(payload), content_type="application/json")


def test_an_unknown_field_on_endpoint_create_is_a_400_naming_it(api: APIClient) -> None:
    response = send(api, "post", "/api/v1/endpoints", {**ENDPOINT, "max_inflight": 3, "zzz": 1})
    assert response.status_code == 400, response.content
    assert response.json() == {"max_inflight": ["Unknown field."], "zzz": ["Unknown field."]}
    assert not Endpoint.objects.exists()


def test_every_write_refuses_unknown_fields(api: APIClient) -> None:
    created = send(api, "post", "/api/v1/endpoints", ENDPOINT).json()
    path = f"/api/v1/endpoints/{created['id']}"
    now = timezone.now()
    writes: list[tuple[str, str, dict[str, Any]]] = [
        ("patch", path, {"description": "x", "typo": 1}),
        ("post", f"{path}/rotate-secret", {"grace_secs": 5}),
        ("post", "/api/v1/events", {"type": "invoice.paid", "data": {}, "tenent": "acme"}),
        (
            "post",
            "/api/v1/replays",
            {"since": (now - timedelta(hours=1)).isoformat(), "until": now.isoformat(), "x": 1},
        ),
        ("post", "/api/v1/portal-sessions", {"tenant": "acme", "expires": 60}),
        ("post", "/api/v1/sources", {"slug": "s", "scheme": "github", "secret": "s" * 20, "y": 1}),
    ]
    for method, where, payload in writes:
        response = send(api, method, where, payload)
        assert response.status_code == 400, (where, response.content)
        unknown = [key for key in payload if response.json().get(key) == ["Unknown field."]]
        assert len(unknown) == 1, (where, response.json())


def test_an_operation_without_a_body_refuses_fields(api: APIClient) -> None:
    response = send(api, "post", "/api/v1/deliveries/1/retry", {"force": True})
    # No such delivery: the 404 comes first; the body is looked at for a real one only.
    assert response.status_code == 404
    from deliveries import services
    from deliveries.models import Delivery, DeliveryStatus

    endpoint = Endpoint.objects.create(url="https://receiver.example.com/h", event_types=["*"])
    event = services.emit("invoice.paid", {})
    delivery, _ = Delivery.objects.update_or_create(
        event=event, endpoint=endpoint, defaults={"status": DeliveryStatus.DEAD_LETTERED}
    )
    response = send(api, "post", f"/api/v1/deliveries/{delivery.pk}/retry", {"force": True})
    assert response.status_code == 400
    assert response.json() == {"force": ["Unknown field."]}


def test_read_only_fields_sent_back_unchanged_are_accepted(api: APIClient) -> None:
    created = send(api, "post", "/api/v1/endpoints", ENDPOINT).json()
    path = f"/api/v1/endpoints/{created['id']}"
    current = api.get(path).json()
    current["description"] = "renamed"
    response = send(api, "patch", path, current)
    assert response.status_code == 200, response.content
    assert response.json()["description"] == "renamed"
    changed = send(api, "patch", path, {"consecutive_failures": 99})
    assert changed.status_code == 400
    assert "consecutive_failures" in changed.json()


def test_nested_objects_refuse_unknown_fields_too() -> None:
    class Item(StrictTypes, serializers.Serializer[Any]):
        name = serializers.CharField()

    class Outer(StrictTypes, serializers.Serializer[Any]):
        item = Item()
        items = Item(many=True)

    body = Outer(data={"item": {"name": "a", "nam": "b"}, "items": [{"name": "c"}, {"x": 1}]})
    assert not body.is_valid()
    assert body.errors["item"] == {"nam": ["Unknown field."]}
    assert body.errors["items"][1] == {"x": ["Unknown field."]}


def test_the_schema_says_additional_properties_false(api: APIClient) -> None:
    schema = api.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    components = schema["components"]["schemas"]
    for name in ("EndpointRequest", "PatchedEndpointRequest", "EventCreateRequest"):
        assert components[name]["additionalProperties"] is False, name
    # A map of free keys keeps its own schema.
    headers = components["EndpointRequest"]["properties"]["custom_headers"]
    assert headers["additionalProperties"] != False  # noqa: E712
