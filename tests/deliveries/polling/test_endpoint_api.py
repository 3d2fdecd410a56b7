"""The endpoints API's side of pull delivery: `mode`, `poll_url`, the key shown once."""

import pytest
from rest_framework.test import APIClient

from deliveries.models import Endpoint
from deliveries.polling import keys

pytestmark = pytest.mark.django_db


def test_a_polling_endpoint_is_created_with_its_key_shown_once(api: APIClient) -> None:
    created = api.post("/api/v1/endpoints", {"mode": "poll", "event_types": ["*"]}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["poll_url"] == f"http://testserver/api/v1/poll/{body['id']}"
    stored = Endpoint.objects.get(pk=body["id"])
    assert stored.poll_key_hash == keys.key_hash(body["poll_key"])
    assert body["poll_key"] not in str(Endpoint.objects.filter(pk=body["id"]).values().get())
    shown = api.get(f"/api/v1/endpoints/{body['id']}").json()
    assert "poll_key" not in shown
    assert shown["mode"] == "poll"

    same = api.patch(
        f"/api/v1/endpoints/{body['id']}", {"mode": "poll", "description": "x"}, format="json"
    )
    assert same.status_code == 200, same.json()
    changed = api.patch(f"/api/v1/endpoints/{body['id']}", {"mode": "push"}, format="json")
    assert changed.status_code == 400
    assert "mode" in changed.json()


def test_a_push_endpoint_still_needs_its_url(api: APIClient) -> None:
    answer = api.post("/api/v1/endpoints", {"event_types": ["*"]}, format="json")
    assert answer.status_code == 400
    assert "url" in answer.json()
    polled = api.post(
        "/api/v1/endpoints",
        {"mode": "poll", "url": "http://127.0.0.1/x", "event_types": ["*"]},
        format="json",
    )
    assert polled.status_code == 400
    assert "url" in polled.json()


def test_a_push_endpoint_gets_a_poll_url_with_its_catch_up_key(api: APIClient) -> None:
    created = api.post(
        "/api/v1/endpoints", {"url": "http://127.0.0.1/x", "event_types": ["*"]}, format="json"
    ).json()
    assert created["poll_url"] is None
    rotated = api.post(f"/api/v1/endpoints/{created['id']}/rotate-poll-key").json()
    assert rotated["poll_key"].startswith(keys.PREFIX)
    assert api.get(f"/api/v1/endpoints/{created['id']}").json()["poll_url"] == rotated["poll_url"]
