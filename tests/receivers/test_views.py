"""The receiving view, request by request (no worker: processing is tested elsewhere)."""

import json
import time
import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.utils import timezone

from receivers import services
from receivers.models import InboxEvent, InboxStatus
from tests.fixtures import MakeSource
from tests.receivers.conftest import post
from tests.receivers.helpers import (
    body_of,
    ours_event,
    sign_github,
    sign_ours,
    sign_standard_lib,
    sign_stripe_lib,
)

pytestmark = pytest.mark.django_db


def raw_of(row: InboxEvent) -> bytes:
    assert row.raw_body is not None
    return bytes(row.raw_body)


def test_valid_request_is_stored_and_acknowledged(client: Client, make_source: MakeSource) -> None:
    source, secret = make_source()
    event_id = str(uuid.uuid4())
    body = ours_event("payment.created", {"payment_id": "p1"}, event_id=event_id)

    response = post(client, source.slug, body, sign_ours([secret], body))

    assert response.status_code == 200
    assert response.json() == {"status": "accepted"}
    row = InboxEvent.objects.get()
    assert (row.event_id, row.type, row.status) == (event_id, "payment.created", "received")
    assert raw_of(row) == body
    assert isinstance(row.payload, dict)
    assert row.payload["data"] == {"payment_id": "p1"}
    assert row.provider_timestamp is not None


def test_signatures_are_not_stored_with_the_headers(
    client: Client, make_source: MakeSource
) -> None:
    source, secret = make_source()
    body = ours_event()
    post(client, source.slug, body, {**sign_ours([secret], body), "Authorization": "x"})
    headers = {k.lower(): v for k, v in InboxEvent.objects.get().headers.items()}
    assert "x-webhook-signature" not in headers
    assert "webhook-signature" not in headers
    assert "authorization" not in headers
    assert headers["x-webhook-id"]
    assert secret not in json.dumps(headers)


def test_tampered_body_is_refused_without_detail(client: Client, make_source: MakeSource) -> None:
    source, secret = make_source()
    body = ours_event(data={"amount": 500})
    headers = sign_ours([secret], body)

    response = post(client, source.slug, body.replace(b"500", b"501"), headers)

    assert response.status_code == 401
    assert response.json() == {"detail": "unauthorized"}
    assert not InboxEvent.objects.exists()


def test_stale_timestamp_is_refused_like_a_bad_signature(
    client: Client, make_source: MakeSource
) -> None:
    source, secret = make_source()
    body = ours_event()
    stale = int(time.time()) - source.tolerance_seconds - 5

    response = post(client, source.slug, body, sign_ours([secret], body, timestamp=stale))

    assert response.status_code == 401
    assert response.json() == {"detail": "unauthorized"}
    assert not InboxEvent.objects.exists()


def test_raw_body_reaches_verification_untouched(client: Client, make_source: MakeSource) -> None:
    """Whitespace, key order, unicode escapes and a form content type survive as bytes:
    nothing (CSRF, parsers, middleware) reads or re-serialises the body before us."""
    source, secret = make_source()
    body = (
        b'{ "type":"payment.created",\n  "id" : "evt-raw", '
        b'"data":{"name":"J\\u00fcrgen \xe2\x9c\x93"},"version":1 }\r\n'
    )
    for content_type in ("application/json", "application/x-www-form-urlencoded"):
        InboxEvent.objects.all().delete()
        response = post(
            client, source.slug, body, sign_ours([secret], body), content_type=content_type
        )
        assert response.status_code == 200, content_type
        assert raw_of(InboxEvent.objects.get()) == body


def test_csrf_checks_do_not_apply(make_source: MakeSource) -> None:
    source, secret = make_source()
    body = ours_event()
    strict = Client(enforce_csrf_checks=True)
    assert post(strict, source.slug, body, sign_ours([secret], body)).status_code == 200


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"type": "a.b"}', "'id'"),
        (b'{"id": "e1"}', "'type'"),
    ],
)
def test_malformed_envelope_is_400(
    client: Client, make_source: MakeSource, body: bytes, detail: str
) -> None:
    source, secret = make_source()
    response = post(client, source.slug, body, sign_ours([secret], body))
    assert response.status_code == 400
    assert detail in response.json()["detail"]
    assert not InboxEvent.objects.exists()


def test_unknown_additive_fields_are_fine(client: Client, make_source: MakeSource) -> None:
    source, secret = make_source()
    body = ours_event(new_top_level={"nested": [1, 2]}, schema_hint="v2")
    assert post(client, source.slug, body, sign_ours([secret], body)).status_code == 200


def test_sequential_duplicate_is_200_and_stored_once(
    client: Client, make_source: MakeSource
) -> None:
    source, secret = make_source()
    body = ours_event()
    first = post(client, source.slug, body, sign_ours([secret], body))
    # A legitimate redelivery: re-signed with a fresh timestamp, same event id.
    second = post(client, source.slug, body, sign_ours([secret], body, int(time.time()) + 1))
    assert (first.status_code, second.status_code) == (200, 200)
    assert second.json() == {"status": "duplicate"}
    assert InboxEvent.objects.count() == 1


def test_same_event_id_from_two_sources_is_two_events(
    client: Client, make_source: MakeSource
) -> None:
    a, secret_a = make_source()
    b, secret_b = make_source()
    body = ours_event(event_id="evt-same")
    assert post(client, a.slug, body, sign_ours([secret_a], body)).json()["status"] == "accepted"
    assert post(client, b.slug, body, sign_ours([secret_b], body)).json()["status"] == "accepted"


def test_same_timestamp_different_ids_are_two_events(
    client: Client, make_source: MakeSource
) -> None:
    source, secret = make_source()
    ts = int(time.time())
    for event_id in ("evt-a", "evt-b"):
        body = ours_event(event_id=event_id)
        response = post(client, source.slug, body, sign_ours([secret], body, timestamp=ts))
        assert response.json()["status"] == "accepted"
    assert InboxEvent.objects.count() == 2


def test_unknown_and_disabled_sources_are_404(client: Client, make_source: MakeSource) -> None:
    source, secret = make_source(enabled=False)
    body = ours_event()
    assert post(client, "nope", body, sign_ours([secret], body)).status_code == 404
    assert post(client, source.slug, body, sign_ours([secret], body)).status_code == 404


def test_head_answers_200_and_get_405(client: Client, make_source: MakeSource) -> None:
    source, _ = make_source()
    assert client.head(f"/receivers/{source.slug}/").status_code == 200
    assert client.get(f"/receivers/{source.slug}/").status_code == 405
    assert client.put(f"/receivers/{source.slug}/").status_code == 405


def test_path_without_trailing_slash_works(client: Client, make_source: MakeSource) -> None:
    source, secret = make_source()
    body = ours_event()
    response = client.post(
        f"/receivers/{source.slug}", body, "application/json", headers=sign_ours([secret], body)
    )
    assert response.status_code == 200


def test_declared_oversize_body_is_413(client: Client, make_source: MakeSource) -> None:
    source, secret = make_source(max_body_bytes=2048)
    body = ours_event(data={"pad": "x" * 3000})
    response = post(client, source.slug, body, sign_ours([secret], body))
    assert response.status_code == 413
    assert not InboxEvent.objects.exists()


def test_body_at_the_limit_is_accepted(client: Client, make_source: MakeSource) -> None:
    source, secret = make_source(max_body_bytes=2048)
    body = ours_event(data={"pad": ""})
    body = ours_event(data={"pad": "x" * (2048 - len(body))})
    assert len(body) == 2048
    assert post(client, source.slug, body, sign_ours([secret], body)).status_code == 200


def test_secret_rotation_window(client: Client, make_source: MakeSource) -> None:
    source, old = make_source()
    new, _ = services.source_rotate_secret(source=source, grace_seconds=3600)

    for secret in (old, new):
        body = ours_event()
        assert post(client, source.slug, body, sign_ours([secret], body)).status_code == 200

    # The grace period ends: only the new secret verifies.
    source.secrets.exclude(fingerprint=source.secrets.first().fingerprint).update(  # type: ignore[union-attr]
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    body = ours_event()
    assert post(client, source.slug, body, sign_ours([old], body)).status_code == 401
    assert post(client, source.slug, body, sign_ours([new], body)).status_code == 200


def test_standard_webhooks_library_signature_is_accepted(
    client: Client, make_source: MakeSource
) -> None:
    source, secret = make_source("standard")
    body = body_of({"type": "invoice.paid", "timestamp": "2026-04-15T10:12:34Z", "data": {}})
    response = post(client, source.slug, body, sign_standard_lib(secret, body, "msg_2QhY"))
    assert response.status_code == 200
    assert InboxEvent.objects.get().event_id == "msg_2QhY"


def test_stripe_library_signature_is_accepted_and_mode_checked(
    client: Client, make_source: MakeSource
) -> None:
    source, secret = make_source(
        "stripe", secret="whsec_test_from_stripe_dashboard", expected_mode="live"
    )

    def stripe_event(event_id: str, livemode: bool) -> bytes:
        return body_of(
            {
                "id": event_id,
                "object": "event",
                "type": "payment_intent.succeeded",
                "created": int(time.time()),
                "livemode": livemode,
                "data": {"object": {"id": "pi_1"}},
            }
        )

    live = stripe_event("evt_live", True)
    test = stripe_event("evt_test", False)
    assert post(client, source.slug, live, sign_stripe_lib(secret, live)).json() == {
        "status": "accepted"
    }
    # A test-mode event sent to the live source: acknowledged, kept, never processed.
    assert post(client, source.slug, test, sign_stripe_lib(secret, test)).json() == {
        "status": "ignored"
    }
    ignored = InboxEvent.objects.get(event_id="evt_test")
    assert ignored.status == InboxStatus.IGNORED
    assert "mode" in ignored.last_error


def test_account_mismatch_is_ignored(client: Client, make_source: MakeSource) -> None:
    source, secret = make_source("stripe", secret="whsec_x", expected_account="acct_ours")
    body = body_of({"id": "evt_1", "type": "a.b", "account": "acct_theirs", "livemode": True})
    assert post(client, source.slug, body, sign_stripe_lib(secret, body)).json() == {
        "status": "ignored"
    }


def test_github_signature_is_accepted(client: Client, make_source: MakeSource) -> None:
    source, secret = make_source("github", secret="a github secret")
    body = body_of({"action": "opened", "pull_request": {"number": 7}})
    headers = sign_github(secret, body, event="pull_request", delivery="72d3162e")
    assert post(client, source.slug, body, headers).status_code == 200
    row = InboxEvent.objects.get()
    assert (row.event_id, row.type) == ("72d3162e", "pull_request.opened")
    assert "X-Hub-Signature-256" not in row.headers


def test_github_form_encoded_body_is_verified_raw_and_parsed(
    client: Client, make_source: MakeSource
) -> None:
    """GitHub's `application/x-www-form-urlencoded` content type: the signature covers the
    form bytes as sent; the event is the JSON in the `payload` field."""
    source, secret = make_source("github", secret="a github secret")
    event = {"action": "created", "issue": {"title": "Grüße & 100% ok?"}}
    form = urlencode({"payload": json.dumps(event, ensure_ascii=False)}).encode()
    headers = sign_github(secret, form, event="issue_comment", delivery="d-form-1")
    form_type = "application/x-www-form-urlencoded"

    response = post(client, source.slug, form, headers, content_type=form_type)
    assert response.status_code == 200, response.content
    row = InboxEvent.objects.get()
    assert (row.event_id, row.type) == ("d-form-1", "issue_comment.created")
    assert row.payload == event
    assert raw_of(row) == form  # stored exactly as signed, not re-encoded

    tampered = form.replace(b"100", b"101")
    response = post(client, source.slug, tampered, headers, content_type=form_type)
    assert response.status_code == 401

    no_payload = urlencode({"other": "{}"}).encode()
    headers = sign_github(secret, no_payload, event="issue_comment", delivery="d-form-2")
    response = post(client, source.slug, no_payload, headers, content_type=form_type)
    assert response.status_code == 400
    assert "payload" in response.json()["detail"]
    assert InboxEvent.objects.count() == 1


def test_provider_secrets_are_required_for_stripe_and_github(make_source: MakeSource) -> None:
    with pytest.raises(services.SecretRequired):
        services.source_create(slug="s", scheme="stripe")
    source, generated = services.source_create(slug="o", scheme="ours")
    assert generated.startswith("whsec_")
    assert source.secrets.get().value == generated


def test_secrets_are_encrypted_at_rest(make_source: MakeSource) -> None:
    _, secret = make_source()
    with connection.cursor() as cursor:
        cursor.execute("SELECT encrypted_value FROM receivers_sourcesecret")
        (stored,) = cursor.fetchone()
    assert secret not in stored


@pytest.mark.django_db(transaction=True)
def test_database_down_is_503_and_the_retry_is_stored(make_source: MakeSource) -> None:
    source, secret = make_source()
    client = Client()
    body = ours_event()
    real_port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = "1"  # nothing listens there: connecting fails
    try:
        response = post(client, source.slug, body, sign_ours([secret], body))
    finally:
        connection.close()
        connection.settings_dict["PORT"] = real_port

    assert response.status_code == 503
    assert response["Retry-After"]

    # The provider retries once we are back: the event is stored, nothing was lost.
    response = post(client, source.slug, body, sign_ours([secret], body))
    assert response.json() == {"status": "accepted"}
    assert InboxEvent.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_insert_failing_after_verification_is_503(make_source: MakeSource) -> None:
    """The source is read and the signature checked, but the inbox cannot take the row
    (table locked by another session past our lock timeout): 503, nothing half-stored."""
    source, secret = make_source()
    client = Client()
    body = ours_event()
    db = settings.DATABASES["default"]
    with psycopg.connect(
        host=db["HOST"],
        port=db["PORT"] or 5432,
        user=db["USER"],
        dbname=connection.settings_dict["NAME"],
    ) as other:
        other.execute("LOCK TABLE receivers_inboxevent IN ACCESS EXCLUSIVE MODE")
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '300ms'")
        try:
            response = post(client, source.slug, body, sign_ours([secret], body))
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
        other.rollback()
    assert response.status_code == 503
    assert post(client, source.slug, body, sign_ours([secret], body)).status_code == 200
    assert InboxEvent.objects.count() == 1


# --- deep nesting, credential-like headers ------------------------------------------------


def signed_headers(secret: str, body: bytes, msg_id: str) -> dict[str, str]:
    # Not sign_ours: it parses the body to find the id, which these bodies defeat.
    from webhooks_core.crypto import signing

    ts = int(time.time())
    headers = signing.signature_headers([secret], msg_id=msg_id, timestamp=ts, body=body)
    return {**headers, "X-Webhook-Id": msg_id, "X-Webhook-Timestamp": str(ts)}


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("scheme", ["ours", "standard", "stripe", "github"])
@pytest.mark.parametrize("depth", [257, 990, 10_000])
def test_a_signed_body_nested_too_deep_is_a_400_with_the_reason(
    client: Client, make_source: MakeSource, scheme: str, depth: int
) -> None:
    source, secret = make_source(scheme)
    body = b'{"id": "deep-1", "type": "payment.created", "data": ' + nested(depth - 1) + b"}"
    headers = {
        "ours": lambda: signed_headers(secret, body, "deep-1"),
        "standard": lambda: sign_standard_lib(secret, body, "deep-1"),
        "stripe": lambda: sign_stripe_lib(secret, body),
        "github": lambda: sign_github(secret, body, delivery="deep-1"),
    }[scheme]()

    response = post(client, source.slug, body, headers)

    assert response.status_code == 400, response.content[:200]
    assert response.json() == {"detail": "body is nested more than 256 levels deep"}
    assert not InboxEvent.objects.exists()


def test_a_body_nested_256_levels_is_accepted(client: Client, make_source: MakeSource) -> None:
    source, secret = make_source()
    body = b'{"id": "deep-ok", "type": "payment.created", "data": ' + nested(255) + b"}"
    response = post(client, source.slug, body, signed_headers(secret, body, "deep-ok"))
    assert response.status_code == 200, response.content


def test_credential_like_headers_are_never_stored(client: Client, make_source: MakeSource) -> None:
    source, secret = make_source()
    body = ours_event()
    credentials = {
        "X-Api-Key": "k1",
        "Api-Key": "k2",
        "X-Auth-Token": "t1",
        "X-Access-Token": "t2",
        "Cookie": "sessionid=s1",
        "Proxy-Authorization": "Basic cDpw",
        "X-Client-Secret": "s2",
        "X-Password": "p1",
        "X-Amz-Security-Token": "t3",
        "X-Session-Id": "s3",
    }
    kept = {"User-Agent": "provider/1.0", "X-Request-Id": "r1", "X-GitHub-Event": "push"}
    post(client, source.slug, body, {**sign_ours([secret], body), **credentials, **kept})

    stored = {k.lower(): v for k, v in InboxEvent.objects.get().headers.items()}
    for name, value in credentials.items():
        assert name.lower() not in stored
        assert value not in json.dumps(stored)
    for name, value in kept.items():
        assert stored[name.lower()] == value


# --- Transfer-Encoding: chunked -----------------------------------------------------------


def chunked_request(slug: str, body: bytes, headers: dict[str, str], terminated: bool) -> Any:
    """A request as gunicorn hands over a chunked body: no CONTENT_LENGTH, the decoded
    bytes in wsgi.input, and wsgi.input_terminated set (the Django test client cannot)."""
    import io

    from django.core.handlers.wsgi import WSGIRequest
    from django.test import RequestFactory

    from receivers.views import receive

    environ = (
        RequestFactory()
        .generic("POST", f"/receivers/{slug}/", data=b"", content_type="application/json")
        .environ
    )
    environ.pop("CONTENT_LENGTH", None)
    environ["HTTP_TRANSFER_ENCODING"] = "chunked"
    environ["wsgi.input"] = io.BytesIO(body)
    if terminated:
        environ["wsgi.input_terminated"] = True
    for name, value in headers.items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    return receive(WSGIRequest(environ), slug=slug)


def test_a_signed_chunked_body_is_accepted(make_source: MakeSource) -> None:
    source, secret = make_source()
    body = ours_event()
    response = chunked_request(source.slug, body, sign_ours([secret], body), terminated=True)
    assert response.status_code == 200, response.content
    assert raw_of(InboxEvent.objects.get()) == body


def test_a_chunked_body_over_the_source_limit_is_a_413(make_source: MakeSource) -> None:
    source, secret = make_source(max_body_bytes=2048)
    body = ours_event(data={"pad": "x" * 3000})
    response = chunked_request(source.slug, body, sign_ours([secret], body), terminated=True)
    assert response.status_code == 413
    assert not InboxEvent.objects.exists()


def test_a_chunked_body_on_a_server_that_cannot_end_it_is_a_411(
    make_source: MakeSource,
) -> None:
    source, secret = make_source()
    body = ours_event()
    response = chunked_request(source.slug, body, sign_ours([secret], body), terminated=False)
    assert response.status_code == 411
    assert not InboxEvent.objects.exists()
