"""Slack, Twilio, Shopify, Paddle, Square and SendGrid through the receiving view.

Every case runs for every provider (``PROVIDERS``): a valid request, a tampered body, a
stale time where the provider signs one, a wrong key, a missing signature, a malformed
header, a duplicate, concurrent duplicates over real HTTP, and a second secret during
rotation. What only one provider does (Slack's challenge, Twilio's URL and JSON bodies,
SendGrid's batches) follows.
"""

import json
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import psycopg
import pytest
import requests
from django.conf import settings
from django.db import connection
from django.test import Client
from django.utils import timezone
from prometheus_client import REGISTRY

from receivers import services
from receivers.handlers import registry
from receivers.models import InboxEvent, InboxStatus, Source
from tests.conftest import wait_until
from tests.receivers.providers import (
    BY_NAME,
    PROVIDERS,
    Key,
    Provider,
    Signed,
    paddle_header,
    sendgrid_headers,
    slack_headers,
    square_headers,
    twilio_json_request,
)

pytestmark = pytest.mark.django_db

TEST_HOST = "http://testserver"
TIMED = [p for p in PROVIDERS if p.signs_time]


def url_of(source: Source, base: str = TEST_HOST) -> str:
    return f"{base}/receivers/{source.slug}/"


def send(client: Client, source: Source, signed: Signed) -> Any:
    path = f"/receivers/{source.slug}/" + (f"?{signed.query}" if signed.query else "")
    return client.post(
        path, data=signed.body, content_type=signed.content_type, headers=signed.headers
    )


def new_source(provider: Provider, **fields: Any) -> tuple[Source, Key]:
    key = provider.new_key()
    source, _ = services.source_create(
        slug=fields.pop("slug", f"{provider.scheme}-{uuid.uuid4().hex[:8]}"),
        scheme=provider.scheme,
        secret=key.secret,
        **fields,
    )
    return source, key


def stored_ids(source: Source) -> list[str]:
    return sorted(InboxEvent.objects.filter(source=source).values_list("event_id", flat=True))


@pytest.fixture(params=PROVIDERS, ids=str)
def provider(request: pytest.FixtureRequest) -> Provider:
    provider: Provider = request.param
    return provider


# --- each provider, each case --------------------------------------------------------------


def test_a_signed_request_is_stored_and_acknowledged(client: Client, provider: Provider) -> None:
    source, key = new_source(provider)
    event_id = f"evt-{uuid.uuid4()}"
    signed = provider.request(key, event_id, url=url_of(source))

    response = send(client, source, signed)

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "accepted"
    assert stored_ids(source) == sorted(provider.event_ids(event_id))
    first = InboxEvent.objects.get(source=source, event_id=event_id)
    assert first.type == provider.event_type
    assert first.status == InboxStatus.RECEIVED
    assert first.raw_body is not None
    # The signature never reaches the stored headers.
    stored = {name.lower() for name in first.headers}
    assert provider.signature_header.lower() not in stored
    assert signed.headers[provider.signature_header] not in json.dumps(first.headers)


def test_a_tampered_body_is_401(client: Client, provider: Provider) -> None:
    source, key = new_source(provider)
    signed = provider.request(key, "evt-tampered", url=url_of(source))

    response = send(client, source, signed.tampered())

    assert response.status_code == 401
    assert response.json() == {"detail": "unauthorized"}
    assert not InboxEvent.objects.exists()


@pytest.mark.parametrize("provider", TIMED, ids=str)
def test_a_stale_timestamp_is_401(client: Client, provider: Provider) -> None:
    source, key = new_source(provider, tolerance_seconds=60)
    stale = int(time.time()) - 61 - 5
    signed = provider.request(key, "evt-stale", url=url_of(source), ts=stale)

    assert send(client, source, signed).status_code == 401
    # The same request signed now is fine: only the time was wrong.
    fresh = provider.request(key, "evt-stale", url=url_of(source))
    assert send(client, source, fresh).status_code == 200


def test_a_request_signed_with_another_key_is_401(client: Client, provider: Provider) -> None:
    source, _ = new_source(provider)
    signed = provider.request(provider.new_key(), "evt-wrong-key", url=url_of(source))

    response = send(client, source, signed)

    assert response.status_code == 401
    assert not InboxEvent.objects.exists()


def test_a_missing_signature_is_401(client: Client, provider: Provider) -> None:
    source, key = new_source(provider)
    signed = provider.request(key, "evt-unsigned", url=url_of(source))

    response = send(client, source, signed.with_headers(**{provider.signature_header: None}))

    assert response.status_code == 401
    assert not InboxEvent.objects.exists()


def test_a_malformed_signature_header_is_400_naming_it(client: Client, provider: Provider) -> None:
    source, key = new_source(provider)
    signed = provider.request(key, "evt-malformed", url=url_of(source))

    response = send(client, source, signed.with_headers(**provider.malformed))

    assert response.status_code == 400
    [header] = provider.malformed
    assert header.lower() in response.json()["detail"].lower()
    assert not InboxEvent.objects.exists()


def test_a_duplicate_is_200_and_stored_once(client: Client, provider: Provider) -> None:
    source, key = new_source(provider)
    first = send(client, source, provider.request(key, "evt-dup", url=url_of(source)))
    # A redelivery: signed again (a later time where the provider signs one), same ids.
    again = provider.request(key, "evt-dup", url=url_of(source), ts=int(time.time()) + 1)
    second = send(client, source, again)

    assert (first.status_code, second.status_code) == (200, 200)
    assert second.json()["status"] == "duplicate"
    assert stored_ids(source) == sorted(provider.event_ids("evt-dup"))


def test_a_second_secret_verifies_during_rotation(client: Client, provider: Provider) -> None:
    source, old = new_source(provider)
    new = provider.new_key()
    services.source_rotate_secret(source=source, secret=new.secret, grace_seconds=3600)

    for n, key in enumerate((old, new)):
        signed = provider.request(key, f"evt-rotation-{n}", url=url_of(source))
        assert send(client, source, signed).status_code == 200, key

    # The grace period ends: only the new secret verifies.
    newest = source.secrets.order_by("-created_at", "-id").first()
    assert newest is not None
    source.secrets.exclude(pk=newest.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert (
        send(client, source, provider.request(old, "evt-r2", url=url_of(source))).status_code == 401
    )
    assert (
        send(client, source, provider.request(new, "evt-r3", url=url_of(source))).status_code == 200
    )


@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicates_over_http_store_once_and_process_once(
    celery_worker: object, live_server: Any, provider: Provider
) -> None:
    """Eight identical requests at once, on the real stack: one row per event, each
    processed once by the handler registered for the provider's type."""
    source, key = new_source(provider)
    seen: list[str] = []
    registry.register(
        provider.event_type, lambda event: seen.append(event.event_id), sources=[source.slug]
    )
    try:
        url = url_of(source, live_server.url)
        signed = provider.request(key, f"evt-{uuid.uuid4()}", url=url)
        target = url + (f"?{signed.query}" if signed.query else "")

        def deliver(_: int) -> tuple[int, str]:
            headers = {**signed.headers, "Content-Type": signed.content_type}
            response = requests.post(target, data=signed.body, headers=headers, timeout=10)
            return response.status_code, response.json()["status"]

        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(deliver, range(8)))

        assert {status for status, _ in answers} == {200}, answers
        assert sorted(outcome for _, outcome in answers) == ["accepted"] + ["duplicate"] * 7
        event_ids = InboxEvent.objects.filter(source=source).values_list("event_id", flat=True)
        assert len(event_ids) == len(provider.event_ids("x"))
        handled = InboxEvent.objects.filter(source=source, type=provider.event_type)
        wait_until(
            lambda: not handled.exclude(status=InboxStatus.PROCESSED).exists(),
            timeout=30,
            what="the provider's event processed",
        )
        assert seen == list(handled.values_list("event_id", flat=True))
        assert set(handled.values_list("attempts", flat=True)) == {1}
    finally:
        registry.unregister(provider.event_type, sources=[source.slug])


# --- Slack: the URL verification challenge -------------------------------------------------


def url_verification(
    challenge: str = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
) -> bytes:
    return json.dumps(
        {"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": challenge, "type": "url_verification"}
    ).encode()


def test_slack_url_verification_is_answered_with_its_challenge_and_not_stored(
    client: Client,
) -> None:
    source, key = new_source(BY_NAME["slack"])
    body = url_verification()

    response = client.post(
        f"/receivers/{source.slug}/",
        body,
        content_type="application/json",
        headers=slack_headers(key.secret, body, int(time.time())),
    )

    assert response.status_code == 200
    assert response.json() == {"challenge": json.loads(body)["challenge"]}
    assert not InboxEvent.objects.exists()


def test_slack_url_verification_must_be_signed_and_fresh(client: Client) -> None:
    source, key = new_source(BY_NAME["slack"])
    body = url_verification()
    stale = slack_headers(key.secret, body, int(time.time()) - 3600)
    wrong = slack_headers("another signing secret", body, int(time.time()))
    for headers in (stale, wrong, {}):
        response = client.post(
            f"/receivers/{source.slug}/", body, content_type="application/json", headers=headers
        )
        assert response.status_code == 401
        assert b"3eZbrw" not in response.content


def test_slack_form_bodies_are_refused_with_the_reason(client: Client) -> None:
    source, key = new_source(BY_NAME["slack"])
    body = b"command=%2Fweather&text=94070&trigger_id=13345224609.738474920.8088930838d88f"
    response = client.post(
        f"/receivers/{source.slug}/",
        body,
        content_type="application/x-www-form-urlencoded",
        headers=slack_headers(key.secret, body, int(time.time())),
    )
    assert response.status_code == 400
    assert "Events API" in response.json()["detail"]


# --- Twilio and Square: the URL the provider called ----------------------------------------


@pytest.mark.parametrize("scheme", ["twilio", "square"])
def test_behind_a_proxy_the_public_url_is_what_is_signed(client: Client, scheme: str) -> None:
    provider = BY_NAME[scheme]
    public = "https://hooks.example.com/inbound/provider"
    source, key = new_source(provider, public_url=public)

    as_called = provider.request(key, "evt-proxy", url=public)
    assert send(client, source, as_called).status_code == 200
    # Signed for the URL the request reached here instead: not what the provider signs.
    internal = provider.request(key, "evt-internal", url=url_of(source))
    assert send(client, source, internal).status_code == 401


@pytest.mark.parametrize("scheme", ["twilio", "square"])
def test_without_a_public_url_the_requests_own_url_is_signed(client: Client, scheme: str) -> None:
    provider = BY_NAME[scheme]
    source, key = new_source(provider)
    elsewhere = provider.request(key, "evt-1", url="https://elsewhere.example/receivers/x/")
    assert send(client, source, elsewhere).status_code == 401
    assert (
        send(client, source, provider.request(key, "evt-2", url=url_of(source))).status_code == 200
    )


def test_twilio_query_string_is_part_of_the_signed_url(client: Client) -> None:
    provider = BY_NAME["twilio"]
    public = "https://hooks.example.com/twilio"
    source, key = new_source(provider, public_url=public)
    signed = provider.request(key, "evt-query", url=f"{public}?tenant=acme")
    assert (
        send(client, source, Signed(**{**signed.__dict__, "query": "tenant=acme"})).status_code
        == 200
    )
    assert (
        send(client, source, Signed(**{**signed.__dict__, "query": "tenant=evil"})).status_code
        == 401
    )


def test_twilio_signature_with_or_without_the_default_port_is_accepted(client: Client) -> None:
    provider = BY_NAME["twilio"]
    source, key = new_source(provider)
    with_port = provider.request(
        key, "evt-port", url=f"http://testserver:80/receivers/{source.slug}/"
    )
    assert send(client, source, with_port).status_code == 200


def test_twilio_json_body_is_checked_against_body_sha256(client: Client) -> None:
    source, key = new_source(BY_NAME["twilio"])
    body = json.dumps({"type": "com.twilio.messaging.message.delivered", "amount": "500"}).encode()
    signed = twilio_json_request(key.secret, url_of(source), body, "idem-json-1")

    assert send(client, source, signed).status_code == 200
    row = InboxEvent.objects.get()
    assert (row.event_id, row.type) == ("idem-json-1", "com.twilio.messaging.message.delivered")
    # The URL (with its hash) is signed, the body only through the hash: a changed body fails.
    retry = twilio_json_request(key.secret, url_of(source), body, "idem-json-2")
    assert send(client, source, retry.tampered()).status_code == 401


def test_twilio_without_idempotency_token_dedupes_on_sid_and_status(client: Client) -> None:
    provider = BY_NAME["twilio"]
    source, key = new_source(provider)
    signed = provider.request(key, "evt-sid", url=url_of(source))
    signed = signed.with_headers(**{"I-Twilio-Idempotency-Token": None})

    assert send(client, source, signed).json()["status"] == "accepted"
    assert send(client, source, signed).json()["status"] == "duplicate"
    row = InboxEvent.objects.get()
    assert row.event_id.startswith("SM")
    assert row.event_id.endswith(":delivered")
    assert isinstance(row.payload, dict)
    assert row.payload["Body"] == "amount 500 ✓"


def test_twilio_behind_a_proxy_needs_its_public_url_and_the_absolute_url_host_is_checked(
    client: Client,
) -> None:
    provider = BY_NAME["twilio"]
    source, key = new_source(provider)
    signed = provider.request(key, "evt-host", url=url_of(source))
    response = client.post(
        f"/receivers/{source.slug}/",
        data=signed.body,
        content_type=signed.content_type,
        headers={**signed.headers, "Host": "evil.example"},
    )
    assert response.status_code == 400
    assert not InboxEvent.objects.exists()


# --- Paddle: several h1 during Paddle's own rotation ---------------------------------------


def test_paddle_header_with_two_h1_verifies_with_either_secret(client: Client) -> None:
    provider = BY_NAME["paddle"]
    source, key = new_source(provider)
    other = provider.new_key()
    signed = provider.request(key, "evt-two-h1", url=url_of(source))
    header = paddle_header([other, key], signed.body, int(time.time()))
    assert (
        send(client, source, signed.with_headers(**{"Paddle-Signature": header})).status_code == 200
    )


# --- Shopify: provider time and topic -----------------------------------------------------


def test_shopify_topic_and_triggered_at_are_stored(client: Client) -> None:
    provider = BY_NAME["shopify"]
    source, key = new_source(provider)
    send(client, source, provider.request(key, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", url=""))
    row = InboxEvent.objects.get()
    assert (row.event_id, row.type) == ("b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "orders/create")
    assert row.provider_timestamp is not None
    assert row.provider_timestamp.isoformat().startswith("2026-04-15T10:12:34")


def test_shopify_event_id_header_is_used_without_a_webhook_id(client: Client) -> None:
    provider = BY_NAME["shopify"]
    source, key = new_source(provider)
    signed = provider.request(key, "unused", url="").with_headers(**{"X-Shopify-Webhook-Id": None})
    assert send(client, source, signed).status_code == 200
    assert InboxEvent.objects.get().event_id == "98880550-7158-44d4-b7cd-2c97c8a091b5"


# --- Square ---------------------------------------------------------------------------------


def test_square_event_fields(client: Client) -> None:
    provider = BY_NAME["square"]
    source, key = new_source(provider)
    body = json.dumps({"type": "payment.created", "data": {}}).encode()  # no event_id
    response = send(
        client, source, Signed(body=body, headers=square_headers(key.secret, url_of(source), body))
    )
    assert response.status_code == 400
    assert "event_id" in response.json()["detail"]


# --- SendGrid: batches ----------------------------------------------------------------------


def test_sendgrid_batch_rows_keep_their_own_event_bytes(client: Client) -> None:
    provider = BY_NAME["sendgrid"]
    source, key = new_source(provider)
    signed = provider.request(key, "sg-own-bytes", url="")

    response = send(client, source, signed)

    assert response.json() == {"status": "accepted", "events": 2, "stored": 2}
    rows = {row.event_id: row for row in InboxEvent.objects.filter(source=source)}
    lines = signed.body.decode().strip()[1:-1].split(",\r\n")
    assert bytes(rows["sg-own-bytes"].raw_body or b"") == lines[0].encode()
    assert bytes(rows["sg-own-bytes-open"].raw_body or b"") == lines[1].encode()
    assert rows["sg-own-bytes"].type == "delivered"
    assert rows["sg-own-bytes-open"].type == "open"
    assert rows["sg-own-bytes"].provider_timestamp is not None


def test_sendgrid_overlapping_batch_stores_only_the_new_events(client: Client) -> None:
    source, key = new_source(BY_NAME["sendgrid"])

    def batch(*ids: str) -> Signed:
        events = [{"sg_event_id": i, "event": "processed", "timestamp": 1} for i in ids]
        body = json.dumps(events).encode()
        return Signed(body=body, headers=sendgrid_headers(key, body, int(time.time())))

    assert send(client, source, batch("a", "b")).json()["stored"] == 2
    assert send(client, source, batch("b", "c")).json() == {
        "status": "accepted",
        "events": 2,
        "stored": 1,
    }
    assert send(client, source, batch("c", "a")).json() == {
        "status": "duplicate",
        "events": 2,
        "stored": 0,
    }
    assert stored_ids(source) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("events", "detail"),
    [
        ([], "no events"),
        ([{"sg_event_id": "a", "event": "open"}, {"event": "open"}], "event 1 of the batch"),
        ([{"sg_event_id": "a", "event": "open"}, "text"], "item 1"),
        ({"sg_event_id": "a", "event": "open"}, "JSON array"),
    ],
)
def test_sendgrid_malformed_batch_is_400_and_stores_nothing(
    client: Client, events: Any, detail: str
) -> None:
    source, key = new_source(BY_NAME["sendgrid"])
    body = json.dumps(events).encode()
    response = send(
        client, source, Signed(body=body, headers=sendgrid_headers(key, body, int(time.time())))
    )
    assert response.status_code == 400
    assert detail in response.json()["detail"]
    assert not InboxEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_sendgrid_batch_is_stored_in_one_transaction() -> None:
    """The batch's second insert cannot take its row (another session holds it past our
    lock timeout): 503, and the first event, already inserted, is not left behind."""
    provider = BY_NAME["sendgrid"]
    source, key = new_source(provider)
    client = Client()
    signed = provider.request(key, "sg-atomic", url="")
    db = settings.DATABASES["default"]
    with psycopg.connect(
        host=db["HOST"],
        port=db["PORT"] or 5432,
        user=db["USER"],
        dbname=connection.settings_dict["NAME"],
    ) as other:
        # Holds the key of the batch's second event (inserted after "sg-atomic").
        other.execute(
            "INSERT INTO receivers_inboxevent (id, source_id, event_id, type, status, last_error,"
            " last_traceback, headers, payload, received_at, updated_at, attempts,"
            " attempts_before_cycle) VALUES (gen_random_uuid(), %s, 'sg-atomic-open', 'open',"
            " 'received', '', '', '{}', '{}', now(), now(), 0, 0)",
            [source.pk],
        )
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '300ms'")
        try:
            response = send(client, source, signed)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
        assert response.status_code == 503
        assert not InboxEvent.objects.filter(source=source).exists()
        other.rollback()
    assert send(client, source, signed).json()["stored"] == 2


# --- the size limit, and counting by scheme -----------------------------------------------


def test_the_size_limit_comes_before_anything_is_parsed(client: Client, provider: Provider) -> None:
    source, key = new_source(provider, max_body_bytes=1024)
    signed = provider.request(key, "evt-large", url=url_of(source))
    large = Signed(**{**signed.__dict__, "body": signed.body + b" " * 1024})
    response = send(client, source, large.with_headers(**provider.malformed))
    assert response.status_code == 413  # not the 400 its malformed header would get
    assert not InboxEvent.objects.exists()


def test_requests_are_counted_and_logged_by_scheme(
    client: Client, provider: Provider, caplog: pytest.LogCaptureFixture
) -> None:
    def count(outcome: str) -> float:
        value = REGISTRY.get_sample_value(
            "receivers_scheme_requests_total", {"scheme": provider.scheme, "outcome": outcome}
        )
        return value or 0.0

    source, key = new_source(provider)
    before = count("accepted"), count("signature_failed")
    caplog.set_level(logging.INFO, logger="receivers.views")

    send(client, source, provider.request(key, "evt-counted", url=url_of(source)))
    send(client, source, provider.request(provider.new_key(), "evt-x", url=url_of(source)))

    assert (count("accepted"), count("signature_failed")) == (before[0] + 1, before[1] + 1)
    records = [r for r in caplog.records if r.name == "receivers.views"]
    assert {getattr(r, "scheme", None) for r in records} == {provider.scheme}


def test_a_sendgrid_batch_of_one_event_stores_that_events_bytes(client: Client) -> None:
    source, key = new_source(BY_NAME["sendgrid"])
    body = b'[ {"sg_event_id": "only", "event": "processed", "timestamp": 1} ]\n'
    signed = Signed(body=body, headers=sendgrid_headers(key, body, int(time.time())))
    assert send(client, source, signed).json() == {"status": "accepted"}
    row = InboxEvent.objects.get()
    assert (
        bytes(row.raw_body or b"")
        == b'{"sg_event_id": "only", "event": "processed", "timestamp": 1}'
    )
