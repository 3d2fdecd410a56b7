"""What the OpenAPI schema says about errors, and that the server answers as it says."""

import json
from typing import Any

import jsonschema
import pytest
import yaml
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

API = "/api/v1"
METHODS = ("get", "post", "patch", "put", "delete")


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    response = APIClient().get(f"{API}/schema")
    assert response.status_code == 200
    loaded: dict[str, Any] = yaml.safe_load(response.content)
    return loaded


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, item[method])
        for path, item in schema["paths"].items()
        for method in METHODS
        if method in item
    ]


def test_every_operation_documents_the_errors_it_can_answer(schema: dict[str, Any]) -> None:
    for method, path, operation in operations(schema):
        documented = set(operation["responses"])
        expected = {"400", "401", "503"}
        if "{" in path:
            expected.add("404")
        if "requestBody" in operation:
            expected |= {"413", "415"}
        assert expected <= documented, (method, path, sorted(expected - documented))


def test_error_responses_have_the_error_body(schema: dict[str, Any]) -> None:
    for method, path, operation in operations(schema):
        for status, response in operation["responses"].items():
            if int(status) < 400:
                continue
            ref = response["content"]["application/json"]["schema"]["$ref"]
            expected = "ValidationError" if status == "400" else "Error"
            assert ref == f"#/components/schemas/{expected}", (method, path, status)
            assert response["description"]
    assert "Retry-After" in schema["paths"][f"{API}/events"]["post"]["responses"]["503"]["headers"]


def test_retries_document_their_conflict(schema: dict[str, Any]) -> None:
    for path in (f"{API}/deliveries/{{id}}/retry", f"{API}/inbox/{{id}}/retry"):
        conflict = schema["paths"][path]["post"]["responses"]["409"]
        assert "Error" in conflict["content"]["application/json"]["schema"]["$ref"]
    assert "409" not in schema["paths"][f"{API}/events"]["post"]["responses"]


def _validate(schema: dict[str, Any], component: str, data: Any) -> None:
    # The components reference nothing else: each validates on its own.
    jsonschema.validate(data, schema["components"]["schemas"][component])


def test_the_server_answers_errors_in_the_documented_shapes(
    schema: dict[str, Any], api: APIClient
) -> None:
    unauthenticated = APIClient().get(f"{API}/endpoints")
    assert unauthenticated.status_code == 401
    _validate(schema, "Error", json.loads(unauthenticated.content))

    missing = api.get(f"{API}/endpoints/6a1f7a60-6d43-4fb6-9b9c-6c3b1c1d2f00")
    assert missing.status_code == 404
    _validate(schema, "Error", json.loads(missing.content))

    not_json = api.post(f"{API}/events", data="type=x", content_type="text/plain")
    assert not_json.status_code == 415
    _validate(schema, "Error", json.loads(not_json.content))

    for invalid in (
        api.post(f"{API}/events", data="{", content_type="application/json"),
        api.post(f"{API}/events", data="[]", content_type="application/json"),
        api.post(f"{API}/events", data='{"type": ""}', content_type="application/json"),
        api.post(
            f"{API}/endpoints",
            data='{"url": "https://a.example", "event_types": [""]}',
            content_type="application/json",
        ),
        api.get(f"{API}/deliveries?limit=abc"),
    ):
        assert invalid.status_code == 400, invalid.content
        _validate(schema, "ValidationError", json.loads(invalid.content))


@pytest.mark.parametrize(
    "path", ["/endpoints/0.5", "/deliveries/1.5/retry", "/nothing", "/endpoints/a/b/c"]
)
def test_a_path_no_route_matches_is_a_json_404_after_the_token_check(
    api: APIClient, path: str
) -> None:
    found = api.get(API + path)
    assert found.status_code == 404
    assert found["Content-Type"] == "application/json"
    assert json.loads(found.content) == {"detail": "Not found."}
    assert api.post(API + path).status_code == 404

    anonymous = APIClient().get(API + path)
    assert anonymous.status_code == 401
    assert anonymous["Content-Type"] == "application/json"


def test_list_parameters_say_what_the_server_enforces(schema: dict[str, Any]) -> None:
    parameters = {
        p["name"]: p["schema"] for p in schema["paths"][f"{API}/events"]["get"]["parameters"]
    }
    assert parameters["limit"] == {"type": "integer", "minimum": 1}
    assert parameters["cursor"]["format"] == "cursor"
    assert parameters["cursor"]["minLength"] == 1
    inbox = {p["name"]: p["schema"] for p in schema["paths"][f"{API}/inbox"]["get"]["parameters"]}
    assert inbox["type"]["minLength"] == 1


# --- requests the schema forbids are refused ------------------------------------------------


def post(client: APIClient, path: str, raw: str) -> Any:
    return client.post(API + path, data=raw, content_type="application/json")


@pytest.fixture
def endpoint_id(api: APIClient) -> str:
    created = post(api, "/endpoints", '{"url": "https://127.0.0.1/h", "event_types": ["*"]}')
    assert created.status_code == 201, created.content
    return str(json.loads(created.content)["id"])


@pytest.mark.parametrize("raw", ["null", "[]", "[1]", '"x"', "0", '{"grace_seconds": "60"}'])
def test_rotating_with_a_body_that_is_not_the_documented_object_is_400(
    api: APIClient, endpoint_id: str, raw: str
) -> None:
    # `null` and `[]` once rotated the secret.
    response = post(api, f"/endpoints/{endpoint_id}/rotate-secret", raw)
    assert response.status_code == 400, response.content
    assert json.loads(response.content)


@pytest.mark.parametrize("raw", ["", "{}", '{"grace_seconds": 60}'])
def test_rotating_without_a_body_or_with_an_object_works(
    api: APIClient, endpoint_id: str, raw: str
) -> None:
    response = post(api, f"/endpoints/{endpoint_id}/rotate-secret", raw)
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    ("path", "raw", "field"),
    [
        ("/events", '{"type": 0, "data": {}}', "type"),
        ("/events", '{"type": "invoice.paid", "data": {}, "version": "1"}', "version"),
        ("/events", '{"type": "invoice.paid", "data": {}, "version": true}', "version"),
        ("/events", '{"type": "invoice.paid", "data": {}, "ordering_key": 7}', "ordering_key"),
        ("/events", '{"type": "invoice.paid\\n", "data": {}}', "type"),
        ("/events", '{"type": " invoice.paid", "data": {}}', "type"),
        ("/replays", '{"since": 0, "until": "2026-01-01T00:00:00Z"}', "since"),
        (
            "/replays",
            '{"since": "2025-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z", "dry_run": "yes"}',
            "dry_run",
        ),
        (
            "/replays",
            '{"since": "2025-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z", '
            '"endpoint_ids": [5]}',
            "endpoint_ids",
        ),
    ],
)
def test_a_value_of_the_wrong_json_type_is_400_not_coerced(
    api: APIClient, path: str, raw: str, field: str
) -> None:
    response = post(api, path, raw)
    assert response.status_code == 400, response.content
    assert field in json.loads(response.content)


def test_event_type_and_data_say_what_emit_enforces(schema: dict[str, Any]) -> None:
    body = schema["components"]["schemas"]["EventCreateRequest"]["properties"]
    assert body["type"]["minLength"] == 1
    assert body["type"]["pattern"] == "^[A-Za-z0-9][A-Za-z0-9_.:-]*$"
    assert "event-types" in body["data"]["description"]


# --- requests the schema allows are accepted: it says what the server enforces ---------------


def test_endpoint_event_types_say_they_need_one_filter(schema: dict[str, Any]) -> None:
    # `event_types: []` is refused, and the schema once had no minItems.
    for name in ("EndpointRequest", "PatchedEndpointRequest"):
        event_types = schema["components"]["schemas"][name]["properties"]["event_types"]
        assert event_types["minItems"] == 1, name
        assert event_types["items"]["minLength"] == 1, name


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"url": 5, "event_types": ["*"]}', "url"),
        ('{"url": "https://127.0.0.1/h", "event_types": [5]}', "event_types"),
        (
            '{"url": "https://127.0.0.1/h", "event_types": ["*"], "max_attempts": "5"}',
            "max_attempts",
        ),
        (
            '{"url": "https://127.0.0.1/h", "event_types": ["*"], "ordered_delivery": "true"}',
            "ordered_delivery",
        ),
        (
            '{"url": "https://127.0.0.1/h", "event_types": ["*"], "custom_headers": {"X-A": 1}}',
            "custom_headers",
        ),
    ],
)
def test_an_endpoint_value_of_the_wrong_json_type_is_400(
    api: APIClient, raw: str, field: str
) -> None:
    response = post(api, "/endpoints", raw)
    assert response.status_code == 400, response.content
    assert field in json.loads(response.content)
