"""The HTTP API v1: endpoints (create, read, list, patch, state, delete), secret rotation
and the endpoint rules applied alike on create and patch."""

import base64
import json
import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from deliveries import services
from deliveries.models import (
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointSecret,
    EndpointState,
    Event,
)
from deliveries.pipeline.wire import build_headers, render_body
from tests.deliveries.api.helpers import (
    API,
    GOOD_ENDPOINT,
    Json,
    assert_field_error,
    body,
    create_endpoint,
    make_delivery,
    make_event,
    patch_json,
    post_json,
    post_raw,
    recipe_v1,
    v1_signatures,
)

pytestmark = pytest.mark.django_db


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
    # The defaults a new endpoint gets (docs/configuration.md).
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


# --- every endpoint rule in the services, for POST and PATCH alike ----------------------

# Inputs the rules refuse, with the field the error is reported under.
ENDPOINT_RULE_CASES: list[tuple[Json, str]] = [
    ({"custom_headers": {"X-Price": "price €5"}}, "custom_headers"),  # headers go out as Latin-1
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
    ({"url": "http://127.0.0.1:18291\\@example.com/x"}, "url"),  # a "\\" before "@": ambiguous
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
    """Forms that urlsplit and urllib3 read differently never reach the database."""
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
    from deliveries.pipeline.wire import redact_headers

    redacted = redact_headers(headers, row.secret_header_names)
    assert redacted["X-Partner"] == "<redacted>"
    assert redacted["X-Tenant"] == "globex"

    # Unmarking a name needs its value in the same request: the
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
