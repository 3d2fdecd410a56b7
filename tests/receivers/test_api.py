"""The receiving side's HTTP API: sources and the inbox, under the same token auth,
pagination and error handling as the sending API.

Plain ``django_db`` tests (nothing commits, so no task message is dispatched), except the
last one, which proves on the real stack that a retry through the API gets the event
processed.
"""

import base64
import json
import logging
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from deliveries.models import ApiToken
from receivers import services
from receivers.handlers import inbox_handler, registry
from receivers.models import InboxEvent, InboxStatus, Source, SourceSecret
from tests.conftest import wait_until
from tests.fixtures import api_client
from tests.receivers.conftest import post
from tests.receivers.helpers import (
    body_of,
    ours_event,
    sign_ours,
    sign_standard_lib,
    sign_stripe_lib,
)

pytestmark = pytest.mark.django_db

API = "/api/v1"
Json = dict[str, Any]


# --- fixtures and helpers ----------------------------------------------------------------


def body(response: Any) -> Any:
    return json.loads(response.content)


def post_json(client: APIClient, path: str, payload: Any) -> Any:
    return client.post(path, data=json.dumps(payload), content_type="application/json")


def create_source(api: APIClient, **fields: Any) -> Json:
    response = post_json(api, f"{API}/sources", {"slug": "shop", "scheme": "ours", **fields})
    assert response.status_code == 201, response.content
    created: Json = body(response)
    return created


def assert_field_error(response: Any, field: str) -> None:
    assert response.status_code == 400, (response.status_code, response.content)
    errors = body(response)
    assert field in errors, errors
    assert errors[field], errors
    assert len(json.dumps(errors[field])) > 4, errors


def stored_event(source: Source, **fields: Any) -> InboxEvent:
    now = timezone.now()
    event_id = fields.pop("event_id", None) or str(uuid.uuid4())
    event_type = fields.pop("type", "payment.created")
    payload = {"id": event_id, "type": event_type, "data": {}}
    return InboxEvent.objects.create(
        source=source,
        event_id=event_id,
        type=event_type,
        payload=payload,
        raw_body=body_of(payload),
        received_at=fields.pop("received_at", now),
        next_attempt_at=now,
        **fields,
    )


# --- authentication ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", f"{API}/sources"),
        ("post", f"{API}/sources"),
        ("get", f"{API}/sources/1"),
        ("get", f"{API}/inbox"),
        ("get", f"{API}/inbox/{uuid.uuid4()}"),
        ("post", f"{API}/inbox/{uuid.uuid4()}/retry"),
    ],
)
def test_no_or_bad_token_is_401(anon: APIClient, method: str, path: str) -> None:
    response = getattr(anon, method)(path)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    anon.credentials(HTTP_AUTHORIZATION="Bearer not-a-token")
    assert getattr(anon, method)(path).status_code == 401


# --- sources: creation ---------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["ours", "standard"])
def test_create_source_generates_the_secret_for_ours_and_standard(
    api: APIClient, scheme: str
) -> None:
    created = create_source(api, slug="billing", scheme=scheme)

    secret = created["secret"]
    assert secret.startswith("whsec_")
    assert created["slug"] == "billing"
    assert created["scheme"] == scheme
    assert created["enabled"] is True
    assert created["tolerance_seconds"] == 300
    assert created["max_body_bytes"] == 256 * 1024
    [fingerprint] = created["secret_fingerprints"]
    assert fingerprint["expires_at"] is None
    assert secret.removeprefix("whsec_") not in fingerprint["fingerprint"]
    stored = SourceSecret.objects.get(source_id=created["id"])
    assert stored.value == secret
    assert secret not in stored.encrypted_value


def test_generated_ours_secret_verifies_signed_requests(api: APIClient) -> None:
    secret = create_source(api, slug="shop", scheme="ours")["secret"]
    event = ours_event("invoice.paid")
    response = post(Client(), "shop", event, sign_ours([secret], event))
    assert response.status_code == 200, response.content
    assert body(response) == {"status": "accepted"}


def test_generated_standard_secret_verifies_the_official_library(api: APIClient) -> None:
    secret = create_source(api, slug="std", scheme="standard")["secret"]
    event = body_of({"type": "invoice.paid", "data": {}})
    headers = sign_standard_lib(secret, event, msg_id="msg_1")
    assert post(Client(), "std", event, headers).status_code == 200


def test_a_standard_secret_without_base64_padding_is_accepted_and_verifies(
    api: APIClient,
) -> None:
    # The Standard Webhooks reference libraries accept it, so do we.
    unpadded = "whsec_enp6enp6enp6enp6enp6enp6enp6enp6enp6enp6eno"
    created = create_source(api, slug="std-unpadded", scheme="standard", secret=unpadded)
    assert created["secret"] == unpadded
    event = body_of({"type": "invoice.paid", "data": {}})
    headers = sign_standard_lib(unpadded, event, msg_id="msg_1")
    assert post(Client(), "std-unpadded", event, headers).status_code == 200


def test_create_source_with_the_providers_secret_and_options(api: APIClient) -> None:
    provider_secret = "whsec_from_the_stripe_dashboard"
    created = create_source(
        api,
        slug="stripe",
        scheme="stripe",
        secret=provider_secret,
        tolerance_seconds=600,
        max_body_bytes=1024 * 1024,
        description="payments",
        expected_mode="live",
        expected_account="acct_1",
    )
    assert created["secret"] == provider_secret
    assert created["tolerance_seconds"] == 600
    assert created["max_body_bytes"] == 1024 * 1024
    assert (created["description"], created["expected_mode"]) == ("payments", "live")
    assert created["expected_account"] == "acct_1"

    event = body_of(
        {"id": "evt_1", "type": "charge.succeeded", "livemode": True, "account": "acct_1"}
    )
    response = post(Client(), "stripe", event, sign_stripe_lib(provider_secret, event))
    assert body(response) == {"status": "accepted"}


@pytest.mark.parametrize("given", [{}, {"expected_mode": None}, {"expected_mode": ""}])
def test_a_source_without_an_expected_mode_is_served_with_null(api: APIClient, given: Json) -> None:
    # It was once served as "", which the schema's enum (live, test) does not allow.
    created = create_source(api, **given)
    assert created["expected_mode"] is None
    assert Source.objects.get().expected_mode == ""
    assert body(api.get(f"{API}/sources/{created['id']}"))["expected_mode"] is None
    assert [s["expected_mode"] for s in body(api.get(f"{API}/sources"))["results"]] == [None]


def test_secret_is_trimmed_like_a_pasted_value(api: APIClient) -> None:
    create_source(api, slug="gh", scheme="github", secret="  a github secret\n")
    assert Source.objects.get(slug="gh").secrets.get().value == "a github secret"


@pytest.mark.parametrize("scheme", ["stripe", "github"])
@pytest.mark.parametrize("secret", [None, ""])
def test_provider_schemes_need_the_providers_secret(
    api: APIClient, scheme: str, secret: str | None
) -> None:
    payload: Json = {"slug": "p", "scheme": scheme}
    if secret is not None:
        payload["secret"] = secret
    response = post_json(api, f"{API}/sources", payload)
    assert_field_error(response, "secret")
    assert "provider" in json.dumps(body(response))
    assert not Source.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"slug": ""}, "slug"),
        ({"slug": "has space"}, "slug"),
        ({"slug": "slash/es"}, "slug"),
        ({"slug": "x" * 101}, "slug"),
        ({"slug": None}, "slug"),
        ({"slug": ["a"]}, "slug"),
        ({"slug": "nul\u0000"}, "slug"),
        ({"scheme": "svix2"}, "scheme"),
        ({"scheme": ""}, "scheme"),
        ({"scheme": None}, "scheme"),
        ({"tolerance_seconds": 0}, "tolerance_seconds"),
        ({"tolerance_seconds": 3601}, "tolerance_seconds"),
        ({"tolerance_seconds": "soon"}, "tolerance_seconds"),
        ({"tolerance_seconds": 10**30}, "tolerance_seconds"),
        ({"max_body_bytes": 1023}, "max_body_bytes"),
        ({"max_body_bytes": 10 * 1024 * 1024 + 1}, "max_body_bytes"),
        ({"max_body_bytes": -1}, "max_body_bytes"),
        ({"expected_mode": "production"}, "expected_mode"),
        # The wrong JSON type was once converted ("expected_account": 0 stored as "0").
        ({"expected_account": 0}, "expected_account"),
        ({"expected_account": True}, "expected_account"),
        ({"tolerance_seconds": "300"}, "tolerance_seconds"),
        ({"enabled": "yes"}, "enabled"),
        ({"enabled": 1}, "enabled"),
        ({"description": "d" * 501}, "description"),
        ({"description": "nul\u0000"}, "description"),
        ({"secret": "line\nbreak"}, "secret"),
        ({"secret": "nul\u0000byte"}, "secret"),
        ({"secret": "\ud800"}, "secret"),
        ({"secret": "s" * 1001}, "secret"),
        ({"secret": {"a": 1}}, "secret"),
        ({"scheme": "standard", "secret": "whsec_not base64!"}, "secret"),
        ({"scheme": "standard", "secret": "whsec_"}, "secret"),
    ],
)
def test_create_source_bad_input_is_400_with_field_message(
    api: APIClient, overrides: Json, field: str
) -> None:
    response = post_json(api, f"{API}/sources", {"slug": "shop", "scheme": "ours", **overrides})
    assert_field_error(response, field)
    assert not Source.objects.exists()


@pytest.mark.parametrize("missing", ["slug", "scheme"])
def test_create_source_missing_field_is_400(api: APIClient, missing: str) -> None:
    payload = {"slug": "shop", "scheme": "ours"}
    del payload[missing]
    assert_field_error(post_json(api, f"{API}/sources", payload), missing)


def test_duplicate_slug_is_400(api: APIClient) -> None:
    create_source(api, slug="shop")
    response = post_json(api, f"{API}/sources", {"slug": "shop", "scheme": "standard"})
    assert_field_error(response, "slug")
    assert Source.objects.count() == 1


@pytest.mark.parametrize(
    ("raw", "content_type", "expected"),
    [
        ("[]", "application/json", 400),
        ("{oops", "application/json", 400),
        ("null", "application/json", 400),
        ('"x"', "application/json", 400),
        ("[" * 5000 + "]" * 5000, "application/json", 400),
        ("slug=shop&scheme=ours", "application/x-www-form-urlencoded", 415),
    ],
)
def test_create_source_nasty_bodies_never_500(
    api: APIClient, raw: str, content_type: str, expected: int
) -> None:
    response = api.generic("POST", f"{API}/sources", raw, content_type=content_type)
    assert response.status_code == expected, response.content
    assert isinstance(body(response), dict)


def test_creating_a_source_logs_no_secret(api: APIClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    secret = create_source(api, slug="quiet", scheme="ours")["secret"]
    assert secret not in caplog.text


# --- sources: reading ----------------------------------------------------------------------


def test_list_and_get_sources_never_show_secrets(api: APIClient) -> None:
    secrets = [
        create_source(api, slug="one", scheme="ours")["secret"],
        create_source(api, slug="two", scheme="github", secret="gh-secret-value")["secret"],
    ]
    listing = api.get(f"{API}/sources")
    assert listing.status_code == 200
    page = body(listing)
    assert set(page) == {"results", "next"}
    assert page["next"] is None
    assert {item["slug"] for item in page["results"]} == {"one", "two"}
    one = next(item for item in page["results"] if item["slug"] == "one")
    detail = api.get(f"{API}/sources/{one['id']}")
    assert detail.status_code == 200
    assert body(detail) == one
    assert "secret" not in one
    assert len(one["secret_fingerprints"]) == 1
    for response in (listing, detail):
        text = response.content.decode()
        for secret in secrets:
            assert secret not in text
            assert secret.removeprefix("whsec_") not in text


def test_sources_list_is_paginated(api: APIClient) -> None:
    for n in range(5):
        create_source(api, slug=f"s{n}")
    first = body(api.get(f"{API}/sources", {"limit": 2}))
    assert len(first["results"]) == 2
    assert first["next"]
    second = body(api.get(first["next"]))
    assert len(second["results"]) == 2
    seen = {s["slug"] for s in first["results"] + second["results"]}
    assert len(seen) == 4


@pytest.mark.parametrize(
    "suffix", ["999999", "0", "-1", "abc", str(uuid.uuid4()), "99999999999999999999999", "%27"]
)
def test_unknown_or_malformed_source_id_is_404(api: APIClient, suffix: str) -> None:
    response = api.get(f"{API}/sources/{suffix}")
    assert response.status_code == 404
    assert isinstance(body(response), dict)


def test_sources_cannot_be_changed_over_the_api(api: APIClient) -> None:
    created = create_source(api)
    for path in (f"{API}/sources/{created['id']}", f"{API}/sources/{created['slug']}"):
        assert api.put(path, {}, format="json").status_code == 405
        assert api.patch(path, {"enabled": False}, format="json").status_code == 405
    # DELETE names a source by its slug only (tests/receivers/test_source_delete.py).
    assert api.delete(f"{API}/sources/{created['id']}").status_code == 404
    assert Source.objects.get().enabled is True


# --- inbox -----------------------------------------------------------------------------------


@pytest.fixture
def inbox() -> dict[str, Any]:
    shop = Source.objects.create(slug="shop", scheme="ours")
    github = Source.objects.create(slug="gh", scheme="github")
    now = timezone.now()
    rows = {
        "created": stored_event(shop, received_at=now - timedelta(seconds=3)),
        "failed": stored_event(
            shop, type="payment.succeeded", status=InboxStatus.FAILED, last_error="boom"
        ),
        "processed": stored_event(
            github, type="push", status=InboxStatus.PROCESSED, received_at=now - timedelta(1)
        ),
    }
    return {"shop": shop, "github": github, **rows}


def ids_of(response: Any) -> set[str]:
    assert response.status_code == 200, response.content
    return {item["id"] for item in body(response)["results"]}


def test_inbox_list_and_filters(api: APIClient, inbox: dict[str, Any]) -> None:
    everything = {str(inbox[k].pk) for k in ("created", "failed", "processed")}
    assert ids_of(api.get(f"{API}/inbox")) == everything
    shop_rows = {str(inbox["created"].pk), str(inbox["failed"].pk)}
    assert ids_of(api.get(f"{API}/inbox", {"source": "shop"})) == shop_rows
    assert ids_of(api.get(f"{API}/inbox", {"source": str(inbox["shop"].pk)})) == shop_rows
    assert ids_of(api.get(f"{API}/inbox", {"status": "failed"})) == {str(inbox["failed"].pk)}
    assert ids_of(api.get(f"{API}/inbox", {"type": "push"})) == {str(inbox["processed"].pk)}
    assert ids_of(api.get(f"{API}/inbox", {"source": "shop", "type": "push"})) == set()
    assert ids_of(api.get(f"{API}/inbox", {"source": "nobody"})) == set()
    assert ids_of(api.get(f"{API}/inbox", {"source": "9" * 30})) == set()


def test_inbox_list_is_newest_first_without_bodies(api: APIClient, inbox: dict[str, Any]) -> None:
    results = body(api.get(f"{API}/inbox"))["results"]
    assert [r["id"] for r in results] == [
        str(inbox[k].pk) for k in ("failed", "created", "processed")
    ]
    failed = results[0]
    assert failed["source"] == "shop"
    assert failed["status"] == "failed"
    assert failed["last_error"] == "boom"
    assert failed["event_id"] == inbox["failed"].event_id
    assert "payload" not in failed
    assert "raw_body" not in failed


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "done"}, "status"),
        ({"type": "t" * 201}, "type"),
        ({"source": "s" * 101}, "source"),
        # Empty values were once taken for "no filter", though the schema says
        # minLength 1.
        ({"type": ""}, "type"),
        ({"source": ""}, "source"),
        ({"status": ""}, "status"),
        ({"limit": "abc"}, "limit"),
    ],
)
def test_inbox_bad_filter_is_400(
    api: APIClient, inbox: dict[str, Any], params: Json, field: str
) -> None:
    assert_field_error(api.get(f"{API}/inbox", params), field)


def test_inbox_pagination_walks_next_links_and_keeps_filters(api: APIClient) -> None:
    source = Source.objects.create(slug="shop", scheme="ours")
    now = timezone.now()
    made = [stored_event(source, received_at=now - timedelta(seconds=n)) for n in range(5)]
    stored_event(source, type="other.type")
    seen: list[str] = []
    url: str | None = f"{API}/inbox?type=payment.created&limit=2"
    while url:
        page = body(api.get(url))
        seen += [item["id"] for item in page["results"]]
        url = page["next"]
        assert url is None or "type=payment.created" in url
    assert seen == [str(row.pk) for row in made]


@pytest.mark.parametrize(
    "cursor",
    ["garbage", "%%%", base64.b64encode(b"p=not-a-time").decode(), "cD14"],
)
def test_inbox_mangled_cursor_is_400(api: APIClient, cursor: str) -> None:
    assert_field_error(api.get(f"{API}/inbox", {"cursor": cursor}), "cursor")


def test_inbox_detail_has_payload_headers_and_error(api: APIClient) -> None:
    _, secret = services.source_create(slug="shop", scheme="ours")
    event = ours_event("invoice.paid", {"amount": 42})
    assert post(Client(), "shop", event, sign_ours([secret], event)).status_code == 200
    stored = InboxEvent.objects.get()

    response = api.get(f"{API}/inbox/{stored.pk}")
    assert response.status_code == 200
    detail = body(response)
    assert detail["payload"] == json.loads(event)
    assert detail["type"] == "invoice.paid"
    assert detail["status"] == "received"
    assert detail["source"] == "shop"
    assert "X-Webhook-Id" in detail["headers"]
    assert "X-Webhook-Signature" not in detail["headers"]
    assert detail["last_traceback"] == ""
    assert "raw_body" not in detail


@pytest.mark.parametrize("suffix", [str(uuid.uuid4()), "not-a-uuid", "1", "%27%3B--"])
@pytest.mark.parametrize("action", ["", "/retry"])
def test_unknown_or_malformed_inbox_id_is_404(api: APIClient, suffix: str, action: str) -> None:
    path = f"{API}/inbox/{suffix}{action}"
    response = api.post(path) if action else api.get(path)
    assert response.status_code == 404
    assert isinstance(body(response), dict)


@pytest.mark.parametrize(
    "status", [InboxStatus.FAILED, InboxStatus.IGNORED, InboxStatus.RETRYING, InboxStatus.PROCESSED]
)
def test_retry_starts_a_fresh_cycle(api: APIClient, status: str) -> None:
    source = Source.objects.create(slug="shop", scheme="ours")
    row = stored_event(source, status=status, attempts=10, last_error="boom")

    response = api.post(f"{API}/inbox/{row.pk}/retry")
    assert response.status_code == 202, response.content
    answer = body(response)
    assert answer["id"] == str(row.pk)
    assert answer["status"] == "received"
    row.refresh_from_db()
    assert row.status == InboxStatus.RECEIVED
    assert row.attempts_before_cycle == 10
    assert row.next_attempt_at is not None


def test_retry_of_an_event_being_processed_is_409(api: APIClient) -> None:
    source = Source.objects.create(slug="shop", scheme="ours")
    row = stored_event(source, status=InboxStatus.PROCESSING)
    response = api.post(f"{API}/inbox/{row.pk}/retry")
    assert response.status_code == 409
    assert "processed" in body(response)["detail"]
    row.refresh_from_db()
    assert row.status == InboxStatus.PROCESSING


def test_inbox_is_read_only_and_retry_needs_post(api: APIClient) -> None:
    source = Source.objects.create(slug="shop", scheme="ours")
    row = stored_event(source)
    assert api.get(f"{API}/inbox/{row.pk}/retry").status_code == 405
    assert api.post(f"{API}/inbox", {}, format="json").status_code == 405
    assert api.delete(f"{API}/inbox/{row.pk}").status_code == 405
    assert (
        api.patch(f"{API}/inbox/{row.pk}", {"status": "processed"}, format="json").status_code
        == 405
    )


@pytest.mark.parametrize("slash", ["", "/"])
def test_paths_work_with_and_without_trailing_slash(api: APIClient, slash: str) -> None:
    created = body(post_json(api, f"{API}/sources{slash}", {"slug": "shop", "scheme": "ours"}))
    assert api.get(f"{API}/sources{slash}").status_code == 200
    assert api.get(f"{API}/sources/{created['id']}{slash}").status_code == 200
    row = stored_event(Source.objects.get(), status=InboxStatus.FAILED)
    assert api.get(f"{API}/inbox{slash}").status_code == 200
    assert api.get(f"{API}/inbox/{row.pk}{slash}").status_code == 200
    assert api.post(f"{API}/inbox/{row.pk}/retry{slash}").status_code == 202


def test_openapi_schema_documents_the_receiving_api(api: APIClient) -> None:
    response = api.get(f"{API}/schema", {"format": "json"})
    assert response.status_code == 200
    paths = body(response)["paths"]
    assert set(paths["/api/v1/sources"]) >= {"get", "post"}
    assert set(paths["/api/v1/sources/{slug}"]) >= {"get", "delete"}
    deleting = paths["/api/v1/sources/{slug}"]["delete"]
    assert {"204", "404", "409"} <= set(deleting["responses"])
    assert "force" in {p["name"] for p in deleting["parameters"]}
    assert "get" in paths["/api/v1/inbox/{id}"]
    assert "post" in paths["/api/v1/inbox/{id}/retry"]
    listed = {p["name"] for p in paths["/api/v1/inbox"]["get"]["parameters"]}
    assert {"source", "status", "type", "cursor", "limit"} <= listed


# --- on the real stack -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_retry_through_the_api_gets_a_failed_event_processed(celery_worker: object) -> None:
    _, token = ApiToken.issue("worker-test")
    client = api_client(token)
    source = Source.objects.create(slug="shop", scheme="ours")
    row = stored_event(source, type="test.api-retry", status=InboxStatus.FAILED, attempts=3)
    calls: list[str] = []

    @inbox_handler("test.api-retry")
    def handle(event: InboxEvent) -> None:
        calls.append(event.event_id)

    try:
        assert client.post(f"{API}/inbox/{row.pk}/retry").status_code == 202
        wait_until(
            lambda: InboxEvent.objects.get(pk=row.pk).status == InboxStatus.PROCESSED,
            what="the retried event processed",
        )
    finally:
        registry.unregister("test.api-retry")
    assert calls == [row.event_id]
    assert InboxEvent.objects.get(pk=row.pk).attempts == 4
