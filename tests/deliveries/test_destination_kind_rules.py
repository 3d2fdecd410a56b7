"""What only an HTTP destination can have: a broker URL refuses OAuth2 delivery auth and
the CloudEvents handshake (both are HTTP's), with a 400 naming the field."""

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from deliveries.models import Endpoint

API = "/api/v1"
BROKER_URL = "amqp://guest:guest@127.0.0.1:5672/?exchange=amq.topic&routing_key=hooks"
AUTH = {
    "type": "oauth2_client_credentials",
    "token_url": "http://127.0.0.1:9/token",
    "client_id": "cid",
    "client_secret": "the-client-secret",
}


def post(api: APIClient, payload: dict[str, Any]) -> Any:
    return api.post(f"{API}/endpoints", data=json.dumps(payload), content_type="application/json")


def patch(api: APIClient, endpoint_id: str, payload: dict[str, Any]) -> Any:
    return api.patch(
        f"{API}/endpoints/{endpoint_id}", data=json.dumps(payload), content_type="application/json"
    )


@pytest.mark.django_db
def test_a_broker_url_refuses_oauth2(api: APIClient) -> None:
    refused = post(api, {"url": BROKER_URL, "event_types": ["*"], "auth": AUTH})
    assert refused.status_code == 400, refused.content
    assert "http(s)" in " ".join(refused.json()["auth"])
    assert not Endpoint.objects.exists()


@pytest.mark.django_db
def test_moving_an_oauth2_endpoint_to_a_broker(api: APIClient) -> None:
    created = post(api, {"url": "http://127.0.0.1:9/hook", "event_types": ["*"], "auth": AUTH})
    assert created.status_code == 201, created.content
    # Given again in the same change, the auth is refused: a broker takes none.
    refused = patch(api, created.json()["id"], {"url": BROKER_URL, "auth": AUTH})
    assert refused.status_code == 400, refused.content
    assert "http(s)" in " ".join(refused.json()["auth"])
    assert Endpoint.objects.get().url == "http://127.0.0.1:9/hook"
    # Else it is dropped with the move to another origin, as a secret header is.
    moved = patch(api, created.json()["id"], {"url": BROKER_URL})
    assert moved.status_code == 200, moved.content
    assert moved.json()["auth"] is None
    assert Endpoint.objects.get().auth is None


@pytest.mark.django_db
def test_a_broker_url_refuses_the_cloudevents_handshake(api: APIClient, settings: Any) -> None:
    settings.WEBHOOKS_VALIDATION_ORIGIN = "hooks.example.com"
    refused = post(api, {"url": BROKER_URL, "event_types": ["*"], "validation": "cloudevents"})
    assert refused.status_code == 400, refused.content
    assert "http(s)" in " ".join(refused.json()["validation"])
    created = post(
        api, {"url": "http://127.0.0.1:9/hook", "event_types": ["*"], "validation": "cloudevents"}
    )
    assert created.status_code == 201, created.content
    moved = patch(api, created.json()["id"], {"url": BROKER_URL})
    assert moved.status_code == 400, moved.content
    assert "http(s)" in " ".join(moved.json()["validation"])
