"""The HTTP API v1 contract (issue 3): authentication, endpoints, events, deliveries, schema.

Plain ``django_db`` tests: nothing commits, so ``on_commit`` enqueues never fire and no
broker is needed. Delivery and Attempt rows are created directly where a test needs them.
"""

import base64
import hashlib
import hmac
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any, cast

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from deliveries import services
from deliveries.models import (
    ApiToken,
    Attempt,
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointSecret,
    EndpointState,
    Event,
)
from deliveries.wire import build_headers, render_body

pytestmark = pytest.mark.django_db

API = "/api/v1"
GOOD_ENDPOINT: dict[str, Any] = {
    "url": "https://receiver.example.com/hooks",
    "event_types": ["invoice.paid", "customer.*"],
}

Json = dict[str, Any]


# --- fixtures and helpers ----------------------------------------------------------------


@pytest.fixture
def token() -> str:
    _, plain = ApiToken.issue("tests")
    return plain


@pytest.fixture
def anon() -> APIClient:
    return APIClient()


@pytest.fixture
def api(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


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
    """Article 000's recipe, independent of deliveries.signing."""
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


# --- authentication ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", f"{API}/endpoints"),
        ("post", f"{API}/endpoints"),
        ("get", f"{API}/deliveries"),
        ("post", f"{API}/events"),
        ("get", f"{API}/events/{uuid.uuid4()}"),
    ],
)
def test_no_token_is_401(anon: APIClient, method: str, path: str) -> None:
    response = getattr(anon, method)(path)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert "detail" in body(response)


@pytest.mark.parametrize(
    "header",
    [
        "Bearer whk_not-a-real-token",
        "Bearer ",
        "Bearer",
        "Token whk_whatever",
        "Basic dXNlcjpwYXNz",
        "bearer \u00e9\u00e8",
    ],
)
def test_bad_token_is_401(anon: APIClient, header: str) -> None:
    anon.credentials(HTTP_AUTHORIZATION=header)
    response = anon.get(f"{API}/endpoints")
    assert response.status_code == 401


def test_good_token_is_accepted_case_insensitive_keyword(anon: APIClient, token: str) -> None:
    anon.credentials(HTTP_AUTHORIZATION=f"bearer {token}")
    assert anon.get(f"{API}/endpoints").status_code == 200


def test_revoked_token_is_401(api: APIClient, token: str) -> None:
    assert api.get(f"{API}/endpoints").status_code == 200
    ApiToken.objects.update(revoked_at=timezone.now())
    assert api.get(f"{API}/endpoints").status_code == 401


def test_token_is_stored_hashed_and_last_use_recorded(api: APIClient, token: str) -> None:
    row = ApiToken.objects.get()
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in (row.token_hash, row.token_prefix)
    assert row.last_used_at is None
    api.get(f"{API}/endpoints")
    row.refresh_from_db()
    assert row.last_used_at is not None


def test_create_api_token_command_prints_a_working_token(anon: APIClient) -> None:
    out, err = StringIO(), StringIO()
    call_command("create_api_token", "billing-service", stdout=out, stderr=err)

    lines = out.getvalue().splitlines()
    assert lines, "nothing printed on stdout"
    plain = lines[-1]
    assert plain == plain.strip()
    assert " " not in plain
    assert plain.startswith("whk_")
    assert ApiToken.objects.get().name == "billing-service"

    anon.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert anon.get(f"{API}/endpoints").status_code == 200


# --- endpoints -------------------------------------------------------------------------


def test_create_endpoint_returns_id_and_secret(api: APIClient) -> None:
    created = create_endpoint(api, description="billing", owner_email="ops@example.com")

    uuid.UUID(created["id"])
    secret = created["secret"]
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
    assert created["url"] == GOOD_ENDPOINT["url"]
    assert created["event_types"] == GOOD_ENDPOINT["event_types"]
    assert created["state"] == "active"
    assert created["description"] == "billing"
    assert created["owner_email"] == "ops@example.com"
    # Defaults from the issue.
    assert created["max_attempts"] == 12
    assert created["backoff_base_seconds"] == 10.0
    assert created["backoff_max_seconds"] == 900.0
    assert created["retry_window_seconds"] == 24 * 3600.0
    assert created["connect_timeout_seconds"] == 3.0
    assert created["read_timeout_seconds"] == 10.0

    # One secret row, encrypted at rest.
    row = EndpointSecret.objects.get(endpoint_id=created["id"])
    assert secret not in row.encrypted_value
    assert row.value == secret
    assert row.expires_at is None


def test_create_endpoint_with_every_option(api: APIClient) -> None:
    created = create_endpoint(
        api,
        url="http://127.0.0.1:8080/in",
        event_types=["*"],
        max_attempts=3,
        backoff_base_seconds=0.5,
        backoff_max_seconds=30,
        retry_window_seconds=3600,
        connect_timeout_seconds=1,
        read_timeout_seconds=2,
        custom_headers={"X-Tenant": "acme"},
    )
    endpoint = Endpoint.objects.get(pk=created["id"])
    assert endpoint.max_attempts == 3
    assert endpoint.backoff_base_seconds == 0.5
    assert endpoint.backoff_max_seconds == 30
    assert endpoint.retry_window_seconds == 3600
    assert endpoint.custom_headers == {"X-Tenant": "acme"}
    assert endpoint.event_types == ["*"]


def test_duplicate_filters_are_collapsed(api: APIClient) -> None:
    created = create_endpoint(api, event_types=["a.b", "a.b", "c.*"])
    assert created["event_types"] == ["a.b", "c.*"]


def test_state_cannot_be_set_on_create(api: APIClient) -> None:
    created = create_endpoint(api, state="suspended")
    assert created["state"] == "active"


def test_read_only_fields_are_ignored_on_create(api: APIClient) -> None:
    forced = str(uuid.uuid4())
    created = create_endpoint(api, id=forced, consecutive_failures=99)
    assert created["id"] != forced
    assert created["consecutive_failures"] == 0


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"url": None}, "url"),
        ({"url": ""}, "url"),
        ({"url": "not a url"}, "url"),
        ({"url": "ftp://example.com/hook"}, "url"),
        ({"url": "ftps://example.com/hook"}, "url"),
        ({"url": "javascript:alert(1)"}, "url"),
        ({"url": "file:///etc/passwd"}, "url"),
        ({"url": "https://" + "a" * 2100 + ".com/"}, "url"),
        ({"url": 12345}, "url"),
        ({"url": ["https://example.com"]}, "url"),
        ({"event_types": []}, "event_types"),
        ({"event_types": None}, "event_types"),
        ({"event_types": "invoice.paid"}, "event_types"),
        ({"event_types": {"a": "b"}}, "event_types"),
        ({"event_types": [""]}, "event_types"),
        ({"event_types": [None]}, "event_types"),
        ({"event_types": [" invoice.paid"]}, "event_types"),
        ({"event_types": ["invoice paid"]}, "event_types"),
        ({"event_types": ["*.paid"]}, "event_types"),
        ({"event_types": ["invoice..paid"]}, "event_types"),
        ({"event_types": ["invoice.*.*"]}, "event_types"),
        ({"event_types": [["nested"]]}, "event_types"),
        ({"event_types": ["x" * 201]}, "event_types"),
        ({"event_types": ["a.b"] * 101}, "event_types"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": -1}, "max_attempts"),
        ({"max_attempts": 51}, "max_attempts"),
        ({"max_attempts": 10**30}, "max_attempts"),
        ({"max_attempts": "many"}, "max_attempts"),
        ({"max_attempts": 2.5}, "max_attempts"),
        ({"max_attempts": None}, "max_attempts"),
        ({"backoff_base_seconds": 0}, "backoff_base_seconds"),
        ({"backoff_base_seconds": "NaN"}, "backoff_base_seconds"),
        ({"backoff_base_seconds": "Infinity"}, "backoff_base_seconds"),
        ({"backoff_base_seconds": 10**400}, "backoff_base_seconds"),
        ({"backoff_max_seconds": 1e300}, "backoff_max_seconds"),
        ({"backoff_base_seconds": 60, "backoff_max_seconds": 30}, "backoff_max_seconds"),
        ({"backoff_max_seconds": 5}, "backoff_max_seconds"),
        ({"retry_window_seconds": 0}, "retry_window_seconds"),
        ({"retry_window_seconds": -3600}, "retry_window_seconds"),
        ({"connect_timeout_seconds": 0}, "connect_timeout_seconds"),
        ({"connect_timeout_seconds": 1000}, "connect_timeout_seconds"),
        ({"read_timeout_seconds": "slow"}, "read_timeout_seconds"),
        ({"owner_email": "not-an-email"}, "owner_email"),
        ({"description": "d" * 501}, "description"),
        ({"custom_headers": "X-A: b"}, "custom_headers"),
        ({"custom_headers": ["X-A"]}, "custom_headers"),
        ({"custom_headers": {"bad name": "x"}}, "custom_headers"),
        ({"custom_headers": {"X-A": "a\r\nX-Injected: 1"}}, "custom_headers"),
        ({"custom_headers": {"X-A": None}}, "custom_headers"),
        ({"custom_headers": {"X-A": "nul\u0000"}}, "custom_headers"),
        ({"custom_headers": {"Host": "internal.example"}}, "custom_headers"),
        ({"custom_headers": {"transfer-encoding": "chunked"}}, "custom_headers"),
        ({"custom_headers": {"Content-Length": "0"}}, "custom_headers"),
        ({"custom_headers": {"X-Webhook-Signature": "t=1,v1=00"}}, "custom_headers"),
        ({"custom_headers": {"webhook-id": "forged"}}, "custom_headers"),
        ({"state": "exploded"}, "state"),
    ],
)
def test_create_endpoint_bad_input_is_400_with_field_message(
    api: APIClient, payload: Json, field: str
) -> None:
    response = post_json(api, f"{API}/endpoints", {**GOOD_ENDPOINT, **payload})
    assert_field_error(response, field)
    assert not Endpoint.objects.exists()


@pytest.mark.parametrize("missing", ["url", "event_types"])
def test_create_endpoint_missing_field_is_400(api: APIClient, missing: str) -> None:
    payload = {k: v for k, v in GOOD_ENDPOINT.items() if k != missing}
    assert_field_error(post_json(api, f"{API}/endpoints", payload), missing)


def test_huge_integer_literal_is_400(api: APIClient) -> None:
    raw = '{"url": "https://example.com/", "event_types": ["*"], "max_attempts": ' + (
        "9" * 5000 + "}"
    )
    response = post_raw(api, f"{API}/endpoints", raw, "application/json")
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("raw", "content_type", "expected"),
    [
        ("{not json", "application/json", 400),
        ("", "application/json", 400),
        ("null", "application/json", 400),
        ("[]", "application/json", 400),
        ('[{"url": "https://example.com/", "event_types": ["*"]}]', "application/json", 400),
        ('"a string"', "application/json", 400),
        ("42", "application/json", 400),
        ('{"url": NaN, "event_types": ["*"]}', "application/json", 400),
        ("[" * 100_000 + "]" * 100_000, "application/json", 400),
        (b"\xff\xfe\x00garbage", "application/json", 400),
        ("url=https://example.com/&event_types=*", "application/x-www-form-urlencoded", 415),
        ("hello", "text/plain", 415),
    ],
)
def test_create_endpoint_nasty_bodies_never_500(
    api: APIClient, raw: str | bytes, content_type: str, expected: int
) -> None:
    response = post_raw(api, f"{API}/endpoints", raw, content_type)
    assert response.status_code == expected, response.content
    assert "detail" in body(response) or "non_field_errors" in body(response) or body(response)
    assert not Endpoint.objects.exists()


def test_get_endpoint(api: APIClient) -> None:
    created = create_endpoint(api)
    response = api.get(f"{API}/endpoints/{created['id']}")
    assert response.status_code == 200
    shown = body(response)
    assert shown["id"] == created["id"]
    assert shown["state"] == "active"
    # The secret is shown once, at creation; never again.
    assert "secret" not in shown
    assert created["secret"] not in response.content.decode()


def test_list_endpoints_is_paginated(api: APIClient) -> None:
    ids = {create_endpoint(api)["id"] for _ in range(3)}
    response = api.get(f"{API}/endpoints")
    assert response.status_code == 200
    page = body(response)
    assert set(page) == {"results", "next"}
    assert page["next"] is None
    assert {item["id"] for item in page["results"]} == ids
    assert all("secret" not in item for item in page["results"])


@pytest.mark.parametrize(
    "suffix",
    [str(uuid.uuid4()), "not-a-uuid", "123", "00000000-0000-0000-0000-00000000000g", "%00", "'"],
)
@pytest.mark.parametrize("method", ["get", "patch", "delete"])
def test_unknown_or_malformed_endpoint_id_is_404(api: APIClient, suffix: str, method: str) -> None:
    response = getattr(api, method)(f"{API}/endpoints/{suffix}")
    assert response.status_code == 404


@pytest.mark.parametrize("suffix", [str(uuid.uuid4()), "not-a-uuid"])
def test_rotate_secret_of_unknown_endpoint_is_404(api: APIClient, suffix: str) -> None:
    assert api.post(f"{API}/endpoints/{suffix}/rotate-secret").status_code == 404


def test_patch_endpoint(api: APIClient) -> None:
    created = create_endpoint(api)
    response = patch_json(
        api,
        f"{API}/endpoints/{created['id']}",
        {"description": "new", "event_types": ["order.*"], "max_attempts": 5},
    )
    assert response.status_code == 200, response.content
    shown = body(response)
    assert shown["description"] == "new"
    assert shown["event_types"] == ["order.*"]
    assert shown["max_attempts"] == 5
    assert shown["url"] == GOOD_ENDPOINT["url"]
    endpoint = Endpoint.objects.get(pk=created["id"])
    assert endpoint.event_types == ["order.*"]
    assert endpoint.max_attempts == 5


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"url": "gopher://x"}, "url"),
        ({"event_types": []}, "event_types"),
        ({"event_types": ["bad pattern"]}, "event_types"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"backoff_max_seconds": 1}, "backoff_max_seconds"),  # below the base of 10
        ({"state": "gone"}, "state"),
        ({"url": None}, "url"),
    ],
)
def test_patch_endpoint_bad_input_is_400(api: APIClient, payload: Json, field: str) -> None:
    created = create_endpoint(api)
    assert_field_error(patch_json(api, f"{API}/endpoints/{created['id']}", payload), field)
    assert Endpoint.objects.get(pk=created["id"]).event_types == GOOD_ENDPOINT["event_types"]


@pytest.mark.parametrize("raw", ["[]", "{oops", "null", '"x"'])
def test_patch_endpoint_nasty_bodies_are_400(api: APIClient, raw: str) -> None:
    created = create_endpoint(api)
    response = api.generic(
        "PATCH", f"{API}/endpoints/{created['id']}", raw, content_type="application/json"
    )
    assert response.status_code == 400


def test_put_is_not_allowed(api: APIClient) -> None:
    created = create_endpoint(api)
    response = api.put(
        f"{API}/endpoints/{created['id']}",
        data=json.dumps(GOOD_ENDPOINT),
        content_type="application/json",
    )
    assert response.status_code == 405


def test_patch_state_suspends_holds_and_resumes(api: APIClient) -> None:
    created = create_endpoint(api)
    pending = make_delivery(make_event(), created["id"], status=DeliveryStatus.PENDING)

    response = patch_json(api, f"{API}/endpoints/{created['id']}", {"state": "suspended"})
    assert response.status_code == 200, response.content
    assert body(response)["state"] == "suspended"
    assert body(response)["state_reason"]
    assert body(response)["state_changed_at"]
    pending.refresh_from_db()
    assert pending.status == DeliveryStatus.HELD

    response = patch_json(api, f"{API}/endpoints/{created['id']}", {"state": "active"})
    assert response.status_code == 200
    assert body(response)["state"] == "active"
    pending.refresh_from_db()
    assert pending.status == DeliveryStatus.PENDING


def test_patch_state_disabled_cancels_waiting_deliveries(api: APIClient) -> None:
    created = create_endpoint(api)
    pending = make_delivery(make_event(), created["id"], status=DeliveryStatus.PENDING)
    response = patch_json(api, f"{API}/endpoints/{created['id']}", {"state": "disabled"})
    assert response.status_code == 200
    assert body(response)["state"] == "disabled"
    assert Endpoint.objects.get(pk=created["id"]).state == EndpointState.DISABLED
    pending.refresh_from_db()
    assert pending.status == DeliveryStatus.CANCELLED


def test_delete_endpoint(api: APIClient) -> None:
    created = create_endpoint(api)
    response = api.delete(f"{API}/endpoints/{created['id']}")
    assert response.status_code == 204
    assert api.get(f"{API}/endpoints/{created['id']}").status_code == 404
    assert not EndpointSecret.objects.filter(endpoint_id=created["id"]).exists()
    assert api.delete(f"{API}/endpoints/{created['id']}").status_code == 404


# --- secret rotation -------------------------------------------------------------------


def test_rotate_secret_keeps_the_old_one_during_the_grace_period(api: APIClient) -> None:
    created = create_endpoint(api)
    before = timezone.now()
    response = post_json(
        api, f"{API}/endpoints/{created['id']}/rotate-secret", {"grace_seconds": 3600}
    )
    assert response.status_code == 200, response.content
    rotated = body(response)
    assert rotated["id"] == created["id"]
    assert rotated["grace_seconds"] == 3600
    new_secret = rotated["secret"]
    assert new_secret.startswith("whsec_")
    assert new_secret != created["secret"]

    rows = list(EndpointSecret.objects.filter(endpoint_id=created["id"]).order_by("created_at"))
    assert [row.value for row in rows] == [created["secret"], new_secret]
    old, new = rows
    assert new.expires_at is None
    assert old.expires_at is not None
    assert (
        before + timedelta(seconds=3600)
        <= old.expires_at
        <= timezone.now() + timedelta(seconds=3600)
    )
    unexpired = EndpointSecret.objects.filter(endpoint_id=created["id"]).unexpired(timezone.now())
    assert {row.value for row in unexpired} == {created["secret"], new_secret}
    later = timezone.now() + timedelta(seconds=3601)
    assert [row.value for row in unexpired.unexpired(later)] == [new_secret]
    assert [
        row.value
        for row in EndpointSecret.objects.filter(endpoint_id=created["id"]).unexpired(later)
    ] == [new_secret]


def test_rotate_secret_default_grace_is_a_day_and_body_is_optional(api: APIClient) -> None:
    created = create_endpoint(api)
    response = api.post(f"{API}/endpoints/{created['id']}/rotate-secret")
    assert response.status_code == 200, response.content
    assert body(response)["grace_seconds"] == 24 * 3600
    old = EndpointSecret.objects.get(endpoint_id=created["id"], expires_at__isnull=False)
    remaining = old.expires_at - timezone.now()  # type: ignore[operator]
    assert timedelta(hours=23, minutes=59) < remaining <= timedelta(hours=24)


def test_rotate_secret_with_zero_grace_retires_the_old_one_at_once(api: APIClient) -> None:
    created = create_endpoint(api)
    response = post_json(
        api, f"{API}/endpoints/{created['id']}/rotate-secret", {"grace_seconds": 0}
    )
    assert response.status_code == 200
    unexpired = EndpointSecret.objects.filter(endpoint_id=created["id"]).unexpired(timezone.now())
    assert [row.value for row in unexpired] == [body(response)["secret"]]


def test_second_rotation_never_extends_an_earlier_expiry(api: APIClient) -> None:
    created = create_endpoint(api)
    url = f"{API}/endpoints/{created['id']}/rotate-secret"
    assert post_json(api, url, {"grace_seconds": 60}).status_code == 200
    assert post_json(api, url, {"grace_seconds": 3600}).status_code == 200
    first = EndpointSecret.objects.filter(endpoint_id=created["id"]).order_by("created_at")[0]
    assert first.expires_at is not None
    assert first.expires_at <= timezone.now() + timedelta(seconds=60)


@pytest.mark.parametrize(
    "payload",
    [
        {"grace_seconds": -1},
        {"grace_seconds": "soon"},
        {"grace_seconds": 10**40},
        {"grace_seconds": 31 * 86400},
        {"grace_seconds": 1.5},
        {"grace_seconds": None},
    ],
)
def test_rotate_secret_bad_grace_is_400(api: APIClient, payload: Json) -> None:
    created = create_endpoint(api)
    response = post_json(api, f"{API}/endpoints/{created['id']}/rotate-secret", payload)
    assert_field_error(response, "grace_seconds")
    assert EndpointSecret.objects.filter(endpoint_id=created["id"]).count() == 1


@pytest.mark.parametrize("raw", ["[1, 2]", "{oops", '"x"'])
def test_rotate_secret_nasty_bodies_are_400(api: APIClient, raw: str) -> None:
    created = create_endpoint(api)
    response = post_raw(
        api, f"{API}/endpoints/{created['id']}/rotate-secret", raw, "application/json"
    )
    assert response.status_code == 400
    assert EndpointSecret.objects.filter(endpoint_id=created["id"]).count() == 1


def _signed_request(endpoint_id: str, event: Event) -> tuple[bytes, dict[str, str]]:
    """What a delivery of `event` to the endpoint would carry, signed with its live secrets."""
    # An event emitted through the API already has its delivery (fanned out in its
    # transaction); a stored one made up by the test gets one here.
    delivery, _ = Delivery.objects.get_or_create(event=event, endpoint_id=endpoint_id)
    delivery = Delivery.objects.select_related("event", "endpoint").get(pk=delivery.pk)
    secrets = [
        row.value
        for row in EndpointSecret.objects.filter(endpoint_id=endpoint_id)
        .unexpired(timezone.now())
        .order_by("-created_at")
    ]
    raw = render_body(delivery.event)
    return raw, build_headers(delivery, raw, secrets, timestamp=int(time.time()))


def test_secret_as_the_api_returned_it_verifies_both_schemes(api: APIClient) -> None:
    created = create_endpoint(api)
    event_id = body(post_json(api, f"{API}/events", {"type": "invoice.paid", "data": {"a": 1}}))[
        "id"
    ]
    raw, headers = _signed_request(created["id"], Event.objects.get(pk=event_id))

    assert headers["X-Webhook-Id"] == event_id == headers["webhook-id"]
    payload = Webhook(created["secret"]).verify(raw, headers)
    assert payload["id"] == event_id
    assert payload["data"] == {"a": 1}

    ts, signatures = v1_signatures(headers["X-Webhook-Signature"])
    assert str(ts) == headers["X-Webhook-Timestamp"]
    assert signatures == [recipe_v1(created["secret"], ts, raw)]


def test_during_rotation_both_secrets_verify_and_after_only_the_new(api: APIClient) -> None:
    created = create_endpoint(api)
    old_secret = created["secret"]
    new_secret = body(
        post_json(api, f"{API}/endpoints/{created['id']}/rotate-secret", {"grace_seconds": 600})
    )["secret"]

    raw, headers = _signed_request(created["id"], make_event())
    Webhook(old_secret).verify(raw, headers)
    Webhook(new_secret).verify(raw, headers)
    ts, signatures = v1_signatures(headers["X-Webhook-Signature"])
    assert sorted(signatures) == sorted(
        [recipe_v1(old_secret, ts, raw), recipe_v1(new_secret, ts, raw)]
    )

    # The grace period ends.
    EndpointSecret.objects.filter(endpoint_id=created["id"], expires_at__isnull=False).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    raw, headers = _signed_request(created["id"], make_event())
    Webhook(new_secret).verify(raw, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old_secret).verify(raw, headers)
    ts, signatures = v1_signatures(headers["X-Webhook-Signature"])
    assert signatures == [recipe_v1(new_secret, ts, raw)]


# --- events ----------------------------------------------------------------------------


def test_post_event_is_202_with_id(api: APIClient) -> None:
    before = timezone.now()
    response = post_json(api, f"{API}/events", {"type": "invoice.paid", "data": {"amount": 42}})
    assert response.status_code == 202, response.content
    answer = body(response)
    assert set(answer) == {"id"}
    event = Event.objects.get(pk=answer["id"])
    assert event.type == "invoice.paid"
    assert event.data == {"amount": 42}
    assert event.version == 1
    assert before <= event.occurred_at <= timezone.now()
    assert event.idempotency_key is None


def test_post_event_with_version_and_occurred_at(api: APIClient) -> None:
    response = post_json(
        api,
        f"{API}/events",
        {
            # A declared type whose newest version is 3 (tests/event_catalogue.py).
            "type": "invoice.refunded",
            "data": [1, "two", None, {"deep": {"er": [True]}}],
            "version": 3,
            "occurred_at": "2026-04-15T12:12:34+02:00",
        },
    )
    assert response.status_code == 202, response.content
    event = Event.objects.get(pk=body(response)["id"])
    assert event.version == 3
    assert event.occurred_at == datetime(2026, 4, 15, 10, 12, 34, tzinfo=UTC)
    assert event.data == [1, "two", None, {"deep": {"er": [True]}}]


@pytest.mark.parametrize("data", [{}, [], "text", 0, True, {"big": 10**30}, {"ü": "☕"}])
def test_post_event_accepts_any_json_data(api: APIClient, data: Any) -> None:
    response = post_json(api, f"{API}/events", {"type": "a.b", "data": data})
    assert response.status_code == 202, response.content
    assert Event.objects.get(pk=body(response)["id"]).data == data


def test_idempotency_key_returns_the_same_event(api: APIClient) -> None:
    payload = {"type": "invoice.paid", "data": {"n": 1}}
    first = post_json(api, f"{API}/events", payload, HTTP_IDEMPOTENCY_KEY="order-42-paid")
    second = post_json(api, f"{API}/events", payload, HTTP_IDEMPOTENCY_KEY="order-42-paid")
    assert first.status_code == second.status_code == 202
    assert body(first)["id"] == body(second)["id"]
    assert Event.objects.count() == 1
    assert Event.objects.get().idempotency_key == "order-42-paid"

    third = post_json(api, f"{API}/events", payload, HTTP_IDEMPOTENCY_KEY="order-43-paid")
    assert body(third)["id"] != body(first)["id"]
    without = post_json(api, f"{API}/events", payload)
    assert body(without)["id"] not in {body(first)["id"], body(third)["id"]}
    assert Event.objects.count() == 3


def test_idempotency_key_reused_with_another_body_returns_the_first_event(
    api: APIClient,
) -> None:
    first = post_json(
        api, f"{API}/events", {"type": "a.b", "data": {"v": 1}}, HTTP_IDEMPOTENCY_KEY="k1"
    )
    second = post_json(
        api, f"{API}/events", {"type": "c.d", "data": {"v": 2}}, HTTP_IDEMPOTENCY_KEY="k1"
    )
    assert second.status_code == 202
    assert body(second)["id"] == body(first)["id"]
    event = Event.objects.get()
    assert (event.type, event.data) == ("a.b", {"v": 1})


def test_list_events_is_paginated(api: APIClient) -> None:
    ids = [body(post_json(api, f"{API}/events", {"type": "a.b", "data": {}}))["id"] for _ in "abc"]
    first = body(api.get(f"{API}/events", {"limit": "2"}))
    assert set(first) == {"results", "next"}
    second = body(api.get(first["next"]))
    assert second["next"] is None
    listed = [item["id"] for item in first["results"] + second["results"]]
    assert listed == list(reversed(ids))
    assert all(item["deliveries"] == [] for item in first["results"])


@pytest.mark.parametrize("key", ["k" * 256, "nul\x00byte", "line\nbreak"])
def test_bad_idempotency_key_is_400(api: APIClient, key: str) -> None:
    response = post_json(
        api, f"{API}/events", {"type": "a.b", "data": {}}, HTTP_IDEMPOTENCY_KEY=key
    )
    assert_field_error(response, "Idempotency-Key")
    assert not Event.objects.exists()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"type": "", "data": {}}, "type"),
        ({"type": "   ", "data": {}}, "type"),
        ({"type": None, "data": {}}, "type"),
        ({"data": {}}, "type"),
        ({"type": "invoice paid", "data": {}}, "type"),
        ({"type": "t" * 201, "data": {}}, "type"),
        ({"type": "a\x00b", "data": {}}, "type"),
        ({"type": ["a.b"], "data": {}}, "type"),
        ({"type": "a.b"}, "data"),
        ({"type": "a.b", "data": None}, "data"),
        ({"type": "a.b", "data": {"s": "nul\u0000"}}, "data"),
        ({"type": "a.b", "data": {"nul\u0000key": 1}}, "data"),
        ({"type": "a.b", "data": ["ok", {"deep": ["lone \ud800 surrogate"]}]}, "data"),
        ({"type": "a.b", "data": {"\udfff": 1}}, "data"),
        ({"type": "a.b", "data": {}, "version": 0}, "version"),
        ({"type": "a.b", "data": {}, "version": -1}, "version"),
        ({"type": "a.b", "data": {}, "version": 10**20}, "version"),
        ({"type": "a.b", "data": {}, "version": "two"}, "version"),
        ({"type": "a.b", "data": {}, "version": None}, "version"),
        ({"type": "a.b", "data": {}, "occurred_at": "yesterday"}, "occurred_at"),
        ({"type": "a.b", "data": {}, "occurred_at": 1700000000}, "occurred_at"),
        ({"type": "a.b", "data": {}, "occurred_at": "9999-12-31T23:59:59-14:00"}, "occurred_at"),
        ({"type": "a.b", "data": {}, "occurred_at": "0001-01-01T00:00:00+14:00"}, "occurred_at"),
    ],
)
def test_post_event_bad_input_is_400_with_field_message(
    api: APIClient, payload: Json, field: str
) -> None:
    response = post_json(api, f"{API}/events", payload)
    assert_field_error(response, field)
    assert not Event.objects.exists()


@pytest.mark.parametrize(
    ("raw", "content_type", "expected"),
    [
        ("{not json", "application/json", 400),
        ("[]", "application/json", 400),
        ('[{"type": "a.b", "data": {}}]', "application/json", 400),
        ("null", "application/json", 400),
        ('{"type": "a.b", "data": {"x": 1e400}}', "application/json", 400),
        ('{"type": "a.b", "data": {"x": NaN}}', "application/json", 400),
        ('{"type": "a.b", "data": {"x": Infinity}}', "application/json", 400),
        ('{"type": "a.b", "data": ' + "[" * 50_000 + "]" * 50_000 + "}", "application/json", 400),
        ('{"type": "a.b", "data": {"x": ' + "1" * 5000 + "}}", "application/json", 400),
        ('{"type": "a.b", "data": {"x": "\\ud800"}}', "application/json", 400),
        ('{"type": "a.b", "data": {"x": "\\u0000"}}', "application/json", 400),
        ("type=a.b&data=1", "application/x-www-form-urlencoded", 415),
        ("<xml/>", "application/xml", 415),
    ],
)
def test_post_event_nasty_bodies_never_500(
    api: APIClient, raw: str, content_type: str, expected: int
) -> None:
    response = post_raw(api, f"{API}/events", raw, content_type)
    assert response.status_code == expected, response.content
    assert not Event.objects.exists()


def test_post_event_deeply_nested_but_parseable_data(api: APIClient) -> None:
    data: Any = "leaf"
    for _ in range(200):
        data = {"d": data}
    response = post_json(api, f"{API}/events", {"type": "a.b", "data": data})
    assert response.status_code == 202
    assert Event.objects.get().data == data


def test_get_event_shows_its_deliveries(
    api: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    first = create_endpoint(api)
    second = create_endpoint(api)
    with django_capture_on_commit_callbacks(execute=True):
        posted = post_json(api, f"{API}/events", {"type": "invoice.paid", "data": {"a": 1}})
    event_id = body(posted)["id"]
    # Its two deliveries were made right after its commit; they are given outcomes here.
    deliveries = Delivery.objects.filter(event_id=event_id)
    sent = deliveries.get(endpoint_id=first["id"])
    dead = deliveries.get(endpoint_id=second["id"])
    deliveries.filter(pk=sent.pk).update(
        status=DeliveryStatus.SUCCEEDED, attempts=2, last_status_code=200
    )
    deliveries.filter(pk=dead.pk).update(
        status=DeliveryStatus.DEAD_LETTERED, attempts=12, last_status_code=500
    )

    response = api.get(f"{API}/events/{event_id}")
    assert response.status_code == 200
    shown = body(response)
    assert shown["id"] == event_id
    assert shown["type"] == "invoice.paid"
    assert shown["data"] == {"a": 1}
    assert shown["version"] == 1
    assert shown["occurred_at"]
    by_id = {item["id"]: item for item in shown["deliveries"]}
    assert set(by_id) == {sent.pk, dead.pk}
    assert by_id[sent.pk]["status"] == "succeeded"
    assert by_id[sent.pk]["attempt_count"] == 2
    assert by_id[sent.pk]["endpoint_id"] == first["id"]
    assert by_id[dead.pk]["status"] == "dead_lettered"
    assert by_id[dead.pk]["attempt_count"] == 12
    assert by_id[dead.pk]["last_status_code"] == 500


def test_get_event_without_deliveries(api: APIClient) -> None:
    event = make_event()
    response = api.get(f"{API}/events/{event.pk}")
    assert response.status_code == 200
    assert body(response)["deliveries"] == []


@pytest.mark.parametrize("suffix", [str(uuid.uuid4()), "not-a-uuid", "1", "%27%3B--"])
def test_unknown_or_malformed_event_id_is_404(api: APIClient, suffix: str) -> None:
    assert api.get(f"{API}/events/{suffix}").status_code == 404


# --- deliveries ------------------------------------------------------------------------


@pytest.fixture
def population(api: APIClient) -> dict[str, Any]:
    """Two endpoints and a few events with deliveries in different states."""
    ep_a = create_endpoint(api)["id"]
    ep_b = create_endpoint(api)["id"]
    paid = make_event("invoice.paid")
    created = make_event("customer.created")
    rows = {
        "a_paid": make_delivery(paid, ep_a, status=DeliveryStatus.SUCCEEDED, attempts=1),
        "b_paid": make_delivery(paid, ep_b, status=DeliveryStatus.DEAD_LETTERED, attempts=3),
        "a_created": make_delivery(created, ep_a, status=DeliveryStatus.PENDING),
        "b_created": make_delivery(created, ep_b, status=DeliveryStatus.PENDING),
    }
    return {"ep_a": ep_a, "ep_b": ep_b, "paid": paid, "created": created, **rows}


def _ids(response: Any) -> set[int]:
    assert response.status_code == 200, response.content
    page = body(response)
    assert set(page) == {"results", "next"}
    return {item["id"] for item in page["results"]}


def test_list_deliveries_and_filters(api: APIClient, population: dict[str, Any]) -> None:
    p = population
    everything = {p[k].pk for k in ("a_paid", "b_paid", "a_created", "b_created")}
    assert _ids(api.get(f"{API}/deliveries")) == everything
    assert _ids(api.get(f"{API}/deliveries", {"status": "pending"})) == {
        p["a_created"].pk,
        p["b_created"].pk,
    }
    assert _ids(api.get(f"{API}/deliveries", {"status": "dead_lettered"})) == {p["b_paid"].pk}
    assert _ids(api.get(f"{API}/deliveries", {"status": "held"})) == set()
    assert _ids(api.get(f"{API}/deliveries", {"endpoint": p["ep_a"]})) == {
        p["a_paid"].pk,
        p["a_created"].pk,
    }
    assert _ids(api.get(f"{API}/deliveries", {"event_type": "invoice.paid"})) == {
        p["a_paid"].pk,
        p["b_paid"].pk,
    }
    assert _ids(
        api.get(
            f"{API}/deliveries",
            {"status": "pending", "endpoint": p["ep_b"], "event_type": "customer.created"},
        )
    ) == {p["b_created"].pk}
    assert _ids(api.get(f"{API}/deliveries", {"endpoint": str(uuid.uuid4())})) == set()
    assert _ids(api.get(f"{API}/deliveries", {"event_type": "nothing.here"})) == set()
    # An empty parameter is an empty value (the schema says minLength 1), not "no filter".
    for name in ("status", "endpoint", "event_type", "event"):
        assert_field_error(api.get(f"{API}/deliveries?{name}="), name)
    assert_field_error(api.get(f"{API}/deliveries?status=pending&status=held"), "status")


def test_list_delivery_fields(api: APIClient, population: dict[str, Any]) -> None:
    response = api.get(f"{API}/deliveries", {"status": "dead_lettered"})
    (item,) = body(response)["results"]
    assert item["status"] == "dead_lettered"
    assert item["attempt_count"] == 3
    assert item["endpoint_id"] == population["ep_b"]
    assert item["event_id"] == str(population["paid"].pk)
    assert item["is_replay"] is False


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"status": "exploded"}, "status"),
        ({"status": "PENDING"}, "status"),
        ({"status": "dead-lettered"}, "status"),
        ({"endpoint": "not-a-uuid"}, "endpoint"),
        ({"endpoint": "1"}, "endpoint"),
        ({"event_type": "x" * 201}, "event_type"),
        ({"event_type": "a\x00b"}, "event_type"),
    ],
)
def test_list_deliveries_bad_filter_is_400(
    api: APIClient, population: dict[str, Any], query: dict[str, str], field: str
) -> None:
    assert_field_error(api.get(f"{API}/deliveries", query), field)


def test_pagination_walks_next_links(api: APIClient) -> None:
    endpoint_id = create_endpoint(api)["id"]
    made = [make_delivery(make_event(), endpoint_id) for _ in range(7)]

    seen: list[int] = []
    sizes: list[int] = []
    url: str | None = f"{API}/deliveries?limit=3"
    while url is not None:
        response = api.get(url)
        assert response.status_code == 200, response.content
        page = body(response)
        sizes.append(len(page["results"]))
        seen.extend(item["id"] for item in page["results"])
        url = page["next"]
        if url is not None:
            assert url.startswith("http://testserver/api/v1/deliveries")
            assert "limit=3" in url
        assert len(sizes) < 10, "next links never end"
    assert sizes == [3, 3, 1]
    assert len(seen) == len(set(seen))
    # Newest first.
    assert seen == [d.pk for d in reversed(made)]


def test_pagination_keeps_filters_in_next_links(api: APIClient) -> None:
    endpoint_id = create_endpoint(api)["id"]
    for _ in range(3):
        make_delivery(make_event(), endpoint_id, status=DeliveryStatus.PENDING)
        make_delivery(make_event(), endpoint_id, status=DeliveryStatus.SUCCEEDED)
    first = body(api.get(f"{API}/deliveries", {"status": "pending", "limit": "2"}))
    assert len(first["results"]) == 2
    assert first["next"]
    second = body(api.get(first["next"]))
    assert len(second["results"]) == 1
    assert second["next"] is None
    assert all(item["status"] == "pending" for item in first["results"] + second["results"])


@pytest.mark.parametrize(
    "limit", ["0", "000", "-1", "-5", "abc", "", "null", "1.5", "+3", " 3", "3 ", "٣", "1_0"]
)
def test_a_limit_that_is_not_a_whole_number_from_1_is_400(api: APIClient, limit: str) -> None:
    # Issue 18: these fell back silently to the default page size.
    assert_field_error(api.get(f"{API}/deliveries", {"limit": limit}), "limit")


def test_a_limit_given_twice_is_400(api: APIClient) -> None:
    assert_field_error(api.get(f"{API}/deliveries?limit=2&limit=3"), "limit")


@pytest.mark.parametrize("limit", ["501", "9999999999999999999999", "9" * 5000])
def test_a_limit_above_the_cap_is_the_cap(api: APIClient, limit: str) -> None:
    endpoint_id = create_endpoint(api)["id"]
    make_delivery(make_event(), endpoint_id)
    response = api.get(f"{API}/deliveries", {"limit": limit})
    assert response.status_code == 200
    assert len(body(response)["results"]) == 1


def test_a_limit_with_leading_zeros_is_its_number(api: APIClient) -> None:
    endpoint_id = create_endpoint(api)["id"]
    for _ in range(3):
        make_delivery(make_event(), endpoint_id)
    response = api.get(f"{API}/deliveries", {"limit": "02"})
    assert response.status_code == 200
    assert len(body(response)["results"]) == 2


@pytest.mark.parametrize("query", ["cursor=", "cursor=a&cursor=b"])
def test_an_empty_or_repeated_cursor_is_400(api: APIClient, query: str) -> None:
    assert_field_error(api.get(f"{API}/deliveries?{query}"), "cursor")


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage",
        "%%%",
        "é",
        base64.b64encode(b"p=not-a-time").decode(),
        base64.b64encode(b"o=-5").decode(),
        base64.b64encode(b"r=x").decode(),
        base64.b64encode(b"p=2026-13-45 99:00:00").decode(),
    ],
)
def test_mangled_cursor_is_400(api: APIClient, cursor: str) -> None:
    endpoint_id = create_endpoint(api)["id"]
    make_delivery(make_event(), endpoint_id)
    assert_field_error(api.get(f"{API}/deliveries", {"cursor": cursor}), "cursor")


def test_get_delivery_with_attempts(api: APIClient) -> None:
    endpoint_id = create_endpoint(api)["id"]
    delivery = make_delivery(
        make_event("invoice.paid"),
        endpoint_id,
        status=DeliveryStatus.SUCCEEDED,
        attempts=2,
        last_status_code=200,
    )
    now = timezone.now()
    Attempt.objects.create(
        delivery=delivery,
        number=2,
        started_at=now,
        duration_ms=12.5,
        request_headers={"X-Webhook-Signature": "[redacted]"},
        response_status=200,
        response_body="ok",
    )
    Attempt.objects.create(
        delivery=delivery,
        number=1,
        started_at=now - timedelta(seconds=10),
        duration_ms=3000.0,
        response_status=None,
        error="ReadTimeout: read timed out",
    )

    response = api.get(f"{API}/deliveries/{delivery.pk}")
    assert response.status_code == 200
    shown = body(response)
    assert shown["id"] == delivery.pk
    assert shown["status"] == "succeeded"
    assert shown["attempt_count"] == 2
    assert shown["event_type"] == "invoice.paid"
    assert [a["number"] for a in shown["attempts"]] == [1, 2]
    first, second = shown["attempts"]
    assert first["response_status"] is None
    assert first["error"] == "ReadTimeout: read timed out"
    assert second["response_status"] == 200
    assert second["response_body"] == "ok"
    assert second["duration_ms"] == 12.5
    assert second["request_headers"] == {"X-Webhook-Signature": "[redacted]"}


def test_get_delivery_without_attempts(api: APIClient) -> None:
    delivery = make_delivery(make_event(), create_endpoint(api)["id"])
    response = api.get(f"{API}/deliveries/{delivery.pk}")
    assert response.status_code == 200
    assert body(response)["attempts"] == []
    assert body(response)["status"] == "pending"


@pytest.mark.parametrize(
    "suffix", ["999999", "not-a-number", "1.5", "-1", "99999999999999999999999999", "0x10"]
)
@pytest.mark.parametrize("action", ["", "/retry"])
def test_unknown_or_malformed_delivery_id_is_404(api: APIClient, suffix: str, action: str) -> None:
    method = api.post if action else api.get
    assert method(f"{API}/deliveries/{suffix}{action}").status_code == 404


@pytest.mark.parametrize(
    "status",
    [
        DeliveryStatus.DEAD_LETTERED,
        DeliveryStatus.CANCELLED,
        DeliveryStatus.PENDING,
    ],
)
def test_retry_delivery(api: APIClient, status: str) -> None:
    delivery = make_delivery(
        make_event(),
        create_endpoint(api)["id"],
        status=status,
        attempts=4,
        first_attempt_at=timezone.now() - timedelta(hours=30),
        completed_at=timezone.now(),
    )
    response = api.post(f"{API}/deliveries/{delivery.pk}/retry")
    assert response.status_code == 202, response.content
    shown = body(response)
    assert shown["id"] == delivery.pk
    assert shown["status"] == "pending"
    assert shown["attempt_count"] == 4
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.attempts_before_cycle == 4
    assert delivery.attempts_in_cycle == 0
    assert delivery.first_attempt_at is None
    assert delivery.completed_at is None
    assert delivery.next_attempt_at is not None
    assert delivery.next_attempt_at <= timezone.now()


@pytest.mark.parametrize("status", [DeliveryStatus.SENDING, DeliveryStatus.HELD])
def test_retry_of_in_flight_or_held_delivery_is_409(api: APIClient, status: str) -> None:
    delivery = make_delivery(make_event(), create_endpoint(api)["id"], status=status, attempts=1)
    response = api.post(f"{API}/deliveries/{delivery.pk}/retry")
    assert response.status_code == 409
    assert body(response)["detail"]
    delivery.refresh_from_db()
    assert delivery.status == status


def test_retry_of_a_succeeded_delivery_is_409_and_points_to_replay(api: APIClient) -> None:
    """Issue 13 item 14: a retry must not send a delivered event again (replay does)."""
    done = timezone.now()
    delivery = make_delivery(
        make_event(),
        create_endpoint(api)["id"],
        status=DeliveryStatus.SUCCEEDED,
        attempts=1,
        completed_at=done,
    )
    response = api.post(f"{API}/deliveries/{delivery.pk}/retry")
    assert response.status_code == 409
    assert response["Content-Type"].startswith("application/json")
    assert "replay" in body(response)["detail"]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.completed_at) == ("succeeded", 1, done)
    assert delivery.attempts_before_cycle == 0
    # The rule is the service's, so the admin action and any other caller keep it too.
    with pytest.raises(services.DeliveryNotRetryable, match="replay"):
        services.delivery_retry(delivery_id=delivery.pk)


def test_retry_needs_post(api: APIClient) -> None:
    delivery = make_delivery(make_event(), create_endpoint(api)["id"])
    assert api.get(f"{API}/deliveries/{delivery.pk}/retry").status_code == 405


def test_deliveries_are_read_only(api: APIClient) -> None:
    delivery = make_delivery(make_event(), create_endpoint(api)["id"])
    assert post_json(api, f"{API}/deliveries", {}).status_code == 405
    assert patch_json(api, f"{API}/deliveries/{delivery.pk}", {"status": "x"}).status_code == 405
    assert api.delete(f"{API}/deliveries/{delivery.pk}").status_code == 405


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


# --- bodies over DATA_UPLOAD_MAX_MEMORY_SIZE (issue 13, item 6) --------------------------


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
    # Issue 13, item 8, the API's side: refused where it arrives, never a 500 later.
    nested = "[" * depth + "]" * depth
    raw = '{"type": "order.created", "data": {"x": ' + nested + "}}"
    response = post_raw(api, "/api/v1/events", raw, "application/json")
    assert response.status_code == 400, response.content[:200]
    assert "nested more than 256 levels" in body(response)["detail"]
    assert not Event.objects.exists()


# --- issue 13: every endpoint rule in the services, for POST and PATCH alike -------------

# Inputs the rules refuse, with the field the error is reported under.
ENDPOINT_RULE_CASES: list[tuple[Json, str]] = [
    ({"custom_headers": {"X-Price": "price €5"}}, "custom_headers"),  # not Latin-1 (item 7)
    ({"custom_headers": {"X-Emoji": "\U0001f600"}}, "custom_headers"),
    ({"custom_headers": {"Connection": "close"}}, "custom_headers"),
    ({"custom_headers": {"Keep-Alive": "timeout=5"}}, "custom_headers"),
    ({"custom_headers": {"TE": "trailers"}}, "custom_headers"),
    ({"custom_headers": {"Upgrade": "h2c"}}, "custom_headers"),
    ({"custom_headers": {"HOST": "internal.example"}}, "custom_headers"),
    ({"custom_headers": {"X-A": "line\nbreak"}}, "custom_headers"),
    ({"custom_headers": {"X-A": "a", "x-a": "b"}}, "custom_headers"),
    ({"custom_headers": {"X-A": "a"}, "secret_headers": ["X-B"]}, "secret_headers"),
    ({"custom_headers": {"X-Api-Key": "<redacted>"}}, "custom_headers"),  # nothing to keep
    ({"event_types": ["nothing.declared.here"]}, "event_types"),
    ({"event_types": ["nosuchprefix.*"]}, "event_types"),
    ({"version_pins": {"invoice.paid": 99}}, "version_pins"),
    ({"version_pins": {"undeclared.type": 1}}, "version_pins"),
    ({"url": "http://127.0.0.1:18291\\@example.com/x"}, "url"),  # item 5
]


@pytest.mark.parametrize(("payload", "field"), ENDPOINT_RULE_CASES)
def test_endpoint_rules_refuse_on_create(api: APIClient, payload: Json, field: str) -> None:
    response = post_json(api, f"{API}/endpoints", {**GOOD_ENDPOINT, **payload})
    assert_field_error(response, field)
    assert not Endpoint.objects.exists()


@pytest.mark.parametrize(("payload", "field"), ENDPOINT_RULE_CASES)
def test_endpoint_rules_refuse_on_patch_and_nothing_changes(
    api: APIClient, payload: Json, field: str
) -> None:
    created = create_endpoint(api, custom_headers={"X-Tenant": "acme"})
    before = Endpoint.objects.values().get(pk=created["id"])
    response = patch_json(api, f"{API}/endpoints/{created['id']}", payload)
    assert_field_error(response, field)
    assert Endpoint.objects.values().get(pk=created["id"]) == before


def test_patch_goes_through_endpoint_update(api: APIClient) -> None:
    """PATCH no longer saves the serializer: the service re-pins versions and changes state."""
    created = create_endpoint(api, event_types=["customer.*"])
    assert "invoice.paid" not in created["version_pins"]
    response = patch_json(
        api, f"{API}/endpoints/{created['id']}", {"event_types": ["invoice.paid"]}
    )
    assert response.status_code == 200, response.content
    assert body(response)["version_pins"]["invoice.paid"] >= 1
    with pytest.raises(services.EndpointInvalid) as refused:
        services.endpoint_update(
            endpoint=Endpoint.objects.get(pk=created["id"]),
            custom_headers={"Transfer-Encoding": "chunked"},
        )
    assert "custom_headers" in refused.value.errors


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:18291\\@example.com/x",
        "https://example.com\\@127.0.0.1/",
        "https://user:pw@example.com/hook",
        "https://127.0.0.1%2f@example.com/",
        "https://example.com@127.0.0.1/",
        "https://exa mple.com/",
        "https://example.com\t/hook",
        "https://0x7f.1/hook",
        "https://2130706433/hook",
        "https://0177.0.0.1/hook",
        "https://127.1/hook",
        "https://example.com:80:90/",
    ],
)
def test_ambiguous_urls_are_refused_outright(api: APIClient, url: str) -> None:
    """Item 5: forms that urlsplit and urllib3 read differently never reach the database."""
    response = post_json(api, f"{API}/endpoints", {**GOOD_ENDPOINT, "url": url})
    assert response.status_code == 400, response.content
    assert "url" in body(response)
    assert not Endpoint.objects.exists()
    with pytest.raises(services.EndpointInvalid):
        services.endpoint_create(url=url, event_types=["*"])


def test_custom_header_credentials_are_stored_encrypted_and_masked_on_read(
    api: APIClient,
) -> None:
    created = create_endpoint(
        api,
        custom_headers={
            "Authorization": "Basic czNjcjN0",
            "X-Api-Key": "k-123",
            "X-Partner": "p-456",
            "X-Tenant": "acme",
        },
        secret_headers=["X-Partner"],
    )
    masked = {
        "Authorization": "<redacted>",
        "X-Api-Key": "<redacted>",
        "X-Partner": "<redacted>",
        "X-Tenant": "acme",
    }
    assert created["custom_headers"] == masked
    assert created["secret_headers"] == ["Authorization", "X-Api-Key", "X-Partner"]
    row = Endpoint.objects.get(pk=created["id"])
    assert row.custom_headers == {"X-Tenant": "acme"}
    stored = json.dumps(row.secret_custom_headers)
    for secret in ("czNjcjN0", "k-123", "p-456"):
        assert secret not in stored
    assert body(api.get(f"{API}/endpoints/{row.pk}"))["custom_headers"] == masked
    listed = body(api.get(f"{API}/endpoints"))
    assert "k-123" not in json.dumps(listed)

    # Sending the masked values back (a GET-modify-PATCH round trip) keeps them.
    response = patch_json(
        api, f"{API}/endpoints/{row.pk}", {"custom_headers": {**masked, "X-Tenant": "globex"}}
    )
    assert response.status_code == 200, response.content
    row.refresh_from_db()
    assert row.custom_headers_plain() == {
        "Authorization": "Basic czNjcjN0",
        "X-Api-Key": "k-123",
        "X-Partner": "p-456",
        "X-Tenant": "globex",
    }
    # On the wire the real values go out; the stored attempt redacts every secret one.
    delivery = make_delivery(make_event(), row.pk)
    headers = build_headers(delivery, b"{}", ["whsec_" + "A" * 44], timestamp=1)
    assert (headers["Authorization"], headers["X-Partner"]) == ("Basic czNjcjN0", "p-456")
    from deliveries.wire import redact_headers

    redacted = redact_headers(headers, row.secret_header_names)
    assert redacted["X-Partner"] == "<redacted>"
    assert redacted["X-Tenant"] == "globex"

    # Unmarking a name needs its value in the same request (issue 23, defect 6): the
    # masked value sent back would unmask the stored one.
    response = patch_json(
        api,
        f"{API}/endpoints/{row.pk}",
        {"custom_headers": {"X-Partner": "<redacted>"}, "secret_headers": []},
    )
    assert response.status_code == 400, response.content
    assert "p-456" not in response.content.decode()
    # A header left out is dropped; unmarking a name with its value stores it in clear.
    response = patch_json(
        api,
        f"{API}/endpoints/{row.pk}",
        {"custom_headers": {"X-Partner": "p-456"}, "secret_headers": []},
    )
    assert response.status_code == 200, response.content
    row.refresh_from_db()
    assert (row.custom_headers, row.secret_custom_headers) == ({"X-Partner": "p-456"}, {})
