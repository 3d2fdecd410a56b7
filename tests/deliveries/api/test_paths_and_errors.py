"""The HTTP API v1 as a whole: paths with and without a trailing slash, the OpenAPI
schema, and bad input of any kind answered with a JSON 4xx, never a 500."""

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from deliveries.models import (
    DeliveryStatus,
    Event,
)
from tests.deliveries.api.helpers import (
    API,
    GOOD_ENDPOINT,
    body,
    create_endpoint,
    make_delivery,
    patch_json,
    post_json,
    post_raw,
)

pytestmark = pytest.mark.django_db


# --- trailing slashes ---------------------------------------------------------------------


@pytest.mark.parametrize("slash", ["", "/"])
def test_paths_work_with_and_without_trailing_slash(api: APIClient, slash: str) -> None:
    created = body(post_json(api, f"{API}/endpoints{slash}", GOOD_ENDPOINT))
    endpoint_id = created["id"]
    assert api.get(f"{API}/endpoints{slash}").status_code == 200
    assert api.get(f"{API}/endpoints/{endpoint_id}{slash}").status_code == 200
    assert (
        patch_json(api, f"{API}/endpoints/{endpoint_id}{slash}", {"description": "x"}).status_code
        == 200
    )
    assert api.post(f"{API}/endpoints/{endpoint_id}/rotate-secret{slash}").status_code == 200

    event_response = post_json(api, f"{API}/events{slash}", {"type": "a.b", "data": {}})
    assert event_response.status_code == 202
    event_id = body(event_response)["id"]
    assert api.get(f"{API}/events/{event_id}{slash}").status_code == 200

    delivery = make_delivery(
        Event.objects.get(pk=event_id), endpoint_id, status=DeliveryStatus.DEAD_LETTERED
    )
    assert api.get(f"{API}/deliveries{slash}").status_code == 200
    assert api.get(f"{API}/deliveries/{delivery.pk}{slash}").status_code == 200
    assert api.post(f"{API}/deliveries/{delivery.pk}/retry{slash}").status_code == 202
    assert api.delete(f"{API}/endpoints/{endpoint_id}{slash}").status_code == 204


# --- OpenAPI schema -----------------------------------------------------------------------


@pytest.mark.parametrize("path", [f"{API}/schema", f"{API}/schema/"])
def test_openapi_schema(api: APIClient, path: str) -> None:
    response = api.get(path, {"format": "json"})
    assert response.status_code == 200, response.content[:500]
    schema = body(response)
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"]
    paths = schema["paths"]
    for expected in [
        "/api/v1/endpoints",
        "/api/v1/endpoints/{id}",
        "/api/v1/endpoints/{id}/rotate-secret",
        "/api/v1/events",
        "/api/v1/events/{id}",
        "/api/v1/deliveries",
        "/api/v1/deliveries/{id}",
        "/api/v1/deliveries/{id}/retry",
    ]:
        assert expected in paths, sorted(paths)
    assert set(paths["/api/v1/endpoints"]) >= {"get", "post"}
    assert set(paths["/api/v1/endpoints/{id}"]) >= {"get", "patch", "delete"}
    listed = {p["name"] for p in paths["/api/v1/deliveries"]["get"]["parameters"]}
    assert {"status", "endpoint", "event_type", "cursor", "limit"} <= listed
    schemes = schema["components"]["securitySchemes"]
    assert any(s.get("scheme") == "bearer" for s in schemes.values())


def test_openapi_schema_yaml_by_default(api: APIClient) -> None:
    response = api.get(f"{API}/schema")
    assert response.status_code == 200
    assert b"openapi: 3." in response.content


# --- whatever the input, never a 500 ------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path_template", "raw"),
    [
        ("post", "/endpoints", '{"url": null, "event_types": null, "max_attempts": null}'),
        ("post", "/endpoints", '{"url": {"$gt": ""}, "event_types": [{}]}'),
        (
            "post",
            "/endpoints",
            '{"url": "https://x.example/", "event_types": ["*"], "custom_headers": {"": ""}}',
        ),
        (
            "post",
            "/endpoints",
            '{"url": "https://x.example/", "event_types": ["*"], "retry_window_seconds": 1e309}',
        ),
        (
            "post",
            "/endpoints",
            '{"url": "https://x.example/", "event_types": ["*"], "owner_email": "a@b.c\\u0000"}',
        ),
        ("post", "/events", '{"type": {"a": 1}, "data": {}}'),
        ("post", "/events", '{"type": "a.b", "data": {}, "occurred_at": null}'),
        ("post", "/events", '{"type": "a.b", "data": {}, "occurred_at": ["2026"]}'),
        ("post", "/events", '{"type": "a.b", "data": {}, "version": 1e400}'),
        ("post", "/events", '{"type": "a.b", "data": {}, "version": true}'),
        ("patch", "/endpoints/{id}", '{"custom_headers": null}'),
        ("patch", "/endpoints/{id}", '{"event_types": [1, 2]}'),
        ("patch", "/endpoints/{id}", '{"backoff_base_seconds": 1e308}'),
        ("post", "/endpoints/{id}/rotate-secret", '{"grace_seconds": 1e400}'),
        ("post", "/endpoints/{id}/rotate-secret", "[]"),
        ("post", "/endpoints/{id}/rotate-secret", "null"),
    ],
)
def test_nasty_payloads_never_500(
    api: APIClient, method: str, path_template: str, raw: str
) -> None:
    endpoint_id = create_endpoint(api)["id"]
    path = API + path_template.format(id=endpoint_id)
    response = api.generic(method.upper(), path, raw, content_type="application/json")
    assert response.status_code < 500, (response.status_code, response.content)
    assert response.status_code in {200, 201, 202, 400}, response.content


def test_errors_are_json(api: APIClient, anon: APIClient) -> None:
    for response in [
        anon.get(f"{API}/deliveries"),
        api.get(f"{API}/deliveries/999999"),
        post_json(api, f"{API}/events", {"type": ""}),
        post_raw(api, f"{API}/events", "{", "application/json"),
    ]:
        assert response.headers["Content-Type"].startswith("application/json")
        assert isinstance(body(response), dict)


# --- bodies over DATA_UPLOAD_MAX_MEMORY_SIZE --------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/events",
        "/api/v1/endpoints",
        "/api/v1/sources",
        "/api/v1/replays",
    ],
)
def test_a_body_over_the_upload_limit_is_a_413_with_a_json_error(
    api: APIClient, path: str, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    big = json.dumps({"type": "order.created", "data": {"blob": "x" * limit}})
    with caplog.at_level("WARNING"):
        response = post_raw(api, path, big, "application/json")
    assert response.status_code == 413, (path, response.content[:200])
    assert str(limit) in body(response)["detail"]
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert not Event.objects.exists()


@pytest.mark.parametrize("depth", [257, 990, 10_000])
def test_event_data_nested_too_deep_is_a_400(api: APIClient, depth: int) -> None:
    # Too deep, the API's side: refused where it arrives, never a 500 later.
    nested = "[" * depth + "]" * depth
    raw = '{"type": "order.created", "data": {"x": ' + nested + "}}"
    response = post_raw(api, "/api/v1/events", raw, "application/json")
    assert response.status_code == 400, response.content[:200]
    assert "nested more than 256 levels" in body(response)["detail"]
    assert not Event.objects.exists()
