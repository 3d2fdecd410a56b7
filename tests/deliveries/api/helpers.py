"""What the tests of the HTTP API share: paths, a valid endpoint, request helpers."""

import hashlib
import hmac
import json
import uuid
from typing import Any, cast

from django.utils import timezone
from rest_framework.test import APIClient

from deliveries.models import (
    Delivery,
    Event,
)

API = "/api/v1"
GOOD_ENDPOINT: dict[str, Any] = {
    "url": "https://receiver.example.com/hooks",
    "event_types": ["invoice.paid", "customer.*"],
}

Json = dict[str, Any]


def body(response: Any) -> Any:
    return json.loads(response.content)


def post_json(client: APIClient, path: str, payload: Any, **extra: Any) -> Any:
    return client.post(path, data=json.dumps(payload), content_type="application/json", **extra)


def patch_json(client: APIClient, path: str, payload: Any) -> Any:
    return client.patch(path, data=json.dumps(payload), content_type="application/json")


def post_raw(client: APIClient, path: str, raw: bytes | str, content_type: str) -> Any:
    # bytes, too: the test client sends them as they are (invalid UTF-8, for one).
    return client.generic("POST", path, cast(str, raw), content_type=content_type)


def create_endpoint(api: APIClient, **overrides: Any) -> Json:
    response = post_json(api, f"{API}/endpoints", {**GOOD_ENDPOINT, **overrides})
    assert response.status_code == 201, response.content
    result: Json = body(response)
    return result


def make_event(type_: str = "invoice.paid", **fields: Any) -> Event:
    return Event.objects.create(
        type=type_, data=fields.pop("data", {"n": 1}), occurred_at=timezone.now(), **fields
    )


def make_delivery(event: Event, endpoint_id: str | uuid.UUID, **fields: Any) -> Delivery:
    return Delivery.objects.create(event=event, endpoint_id=endpoint_id, **fields)


def recipe_v1(secret: str, timestamp: int, raw: bytes) -> str:
    """The wire format page's recipe, independent of webhooks_core.crypto.signing."""
    return hmac.new(
        secret.encode("utf-8"), f"{timestamp}.".encode() + raw, hashlib.sha256
    ).hexdigest()


def v1_signatures(header: str) -> tuple[int, list[str]]:
    parts = [item.split("=", 1) for item in header.split(",")]
    timestamp = int(next(value for key, value in parts if key == "t"))
    return timestamp, [value for key, value in parts if key == "v1"]


def assert_field_error(response: Any, field: str) -> None:
    assert response.status_code == 400, (response.status_code, response.content)
    errors = body(response)
    assert field in errors, errors
    messages = errors[field]
    assert messages, errors
    flat = json.dumps(messages)
    assert len(flat) > 4, errors
