"""Replays of signed material under new unsigned headers, and replayed batches.

Shopify, GitHub and Twilio sign no timestamp, and their event id (and type) come from
headers they do not sign: a captured request sent again with another id or topic is the
same signed material, so it is a duplicate, never a second event. A SendGrid batch is
stored in one statement, and a replayed batch costs a lookup, not an insert per event.
"""

import json
import time
import uuid
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from receivers import schemes, services
from receivers.models import InboxEvent, Source
from tests.receivers.helpers import sign_github
from tests.receivers.providers import BY_NAME, Signed, sendgrid_headers, twilio_json_request

pytestmark = pytest.mark.django_db

URL = "http://testserver/receivers/{slug}/"


def source_of(scheme: str, secret: str, **fields: Any) -> Source:
    source, _ = services.source_create(
        slug=f"{scheme}-{uuid.uuid4().hex[:8]}", scheme=scheme, secret=secret, **fields
    )
    return source


def send(client: Client, source: Source, signed: Signed) -> Any:
    path = f"/receivers/{source.slug}/" + (f"?{signed.query}" if signed.query else "")
    response = client.post(
        path, data=signed.body, content_type=signed.content_type, headers=signed.headers
    )
    assert response.status_code == 200, response.content
    return response.json()["status"]


def test_shopify_a_new_webhook_id_or_topic_on_the_same_signed_body_is_a_duplicate(
    client: Client,
) -> None:
    provider = BY_NAME["shopify"]
    key = provider.new_key()
    source = source_of("shopify", key.secret)
    signed = provider.request(key, "wh-1", url="")
    assert send(client, source, signed) == "accepted"

    assert send(client, source, signed.with_headers(**{"X-Shopify-Webhook-Id": "wh-2"})) == (
        "duplicate"
    )
    renamed = signed.with_headers(
        **{"X-Shopify-Webhook-Id": "wh-3", "X-Shopify-Topic": "orders/cancelled"}
    )
    assert send(client, source, renamed) == "duplicate"
    assert list(InboxEvent.objects.filter(source=source).values_list("event_id", "type")) == [
        ("wh-1", "orders/create")
    ]


def test_github_a_new_delivery_id_or_event_on_the_same_signed_body_is_a_duplicate(
    client: Client,
) -> None:
    source = source_of("github", "gh-secret")
    body = json.dumps({"action": "opened", "number": 500}).encode()
    first = sign_github("gh-secret", body, event="pull_request", delivery="d-1")
    assert send(client, source, Signed(body=body, headers=first)) == "accepted"
    for event, delivery in (("pull_request", "d-2"), ("issues", "d-3")):
        again = sign_github("gh-secret", body, event=event, delivery=delivery)
        assert send(client, source, Signed(body=body, headers=again)) == "duplicate"
    assert list(InboxEvent.objects.filter(source=source).values_list("event_id", "type")) == [
        ("d-1", "pull_request.opened")
    ]
    # Another body is another event, as before.
    other = json.dumps({"action": "closed", "number": 500}).encode()
    headers = sign_github("gh-secret", other, event="pull_request", delivery="d-4")
    assert send(client, source, Signed(body=other, headers=headers)) == "accepted"


def test_twilio_a_new_idempotency_token_or_reordered_form_is_a_duplicate(
    client: Client,
) -> None:
    provider = BY_NAME["twilio"]
    key = provider.new_key()
    source = source_of("twilio", key.secret)
    signed = provider.request(key, "tok-1", url=URL.format(slug=source.slug))
    assert send(client, source, signed) == "accepted"
    new_token = signed.with_headers(**{"I-Twilio-Idempotency-Token": "tok-2"})
    assert send(client, source, new_token) == "duplicate"
    # The same fields in another order: the same signature, the same material.
    fields = signed.body.decode().split("&")
    reordered = Signed(
        body="&".join(reversed(fields)).encode(),
        headers={**signed.headers, "I-Twilio-Idempotency-Token": "tok-3"},
        content_type=signed.content_type,
    )
    assert send(client, source, reordered) == "duplicate"
    # A JSON callback, signed through the body's hash in the URL.
    body = json.dumps({"id": "EV1", "type": "com.twilio.messaging.message.delivered"}).encode()
    json_signed = twilio_json_request(key.secret, URL.format(slug=source.slug), body, "tok-4")
    assert send(client, source, json_signed) == "accepted"
    again = json_signed.with_headers(**{"I-Twilio-Idempotency-Token": "tok-5"})
    assert send(client, source, again) == "duplicate"
    assert InboxEvent.objects.filter(source=source).count() == 2


def test_every_scheme_without_a_signed_timestamp_names_its_signed_material() -> None:
    # The replay digest is of what the signature covers: a scheme that signs the URL
    # must say so in its material, or two URLs' requests would be one event.
    for name, scheme in schemes.SCHEMES.items():
        if scheme.has_timestamp or not scheme.signs_url:
            continue
        parts = schemes.SignedParts(candidates=["x"], url="https://a.example/hook")
        other = schemes.SignedParts(candidates=["x"], url="https://b.example/hook")
        assert scheme.signed_material(parts, b"{}") != scheme.signed_material(other, b"{}"), name


def inbox_statements(queries: CaptureQueriesContext) -> list[str]:
    table = InboxEvent._meta.db_table
    return [q["sql"] for q in queries.captured_queries if table in q["sql"]]


def test_a_sendgrid_batch_is_one_insert_and_its_replay_one_lookup(client: Client) -> None:
    provider = BY_NAME["sendgrid"]
    key = provider.new_key()
    source = source_of("sendgrid", key.secret, max_body_bytes=1024 * 1024)
    events = [{"sg_event_id": f"e{n:05}", "event": "open", "timestamp": 1} for n in range(7000)]
    body = json.dumps(events).encode()
    signed = Signed(body=body, headers=sendgrid_headers(key, body, int(time.time())))

    with CaptureQueriesContext(connection) as first:
        response = client.post(
            f"/receivers/{source.slug}/",
            data=body,
            content_type="application/json",
            headers=signed.headers,
        )
    assert response.json() == {"status": "accepted", "events": 7000, "stored": 7000}
    inserts = [sql for sql in inbox_statements(first) if sql.startswith("INSERT")]
    assert len(inserts) == 1
    assert InboxEvent.objects.filter(source=source).count() == 7000

    with CaptureQueriesContext(connection) as replay:
        response = client.post(
            f"/receivers/{source.slug}/",
            data=body,
            content_type="application/json",
            headers=signed.headers,
        )
    assert response.json() == {"status": "duplicate", "events": 7000, "stored": 0}
    statements = inbox_statements(replay)
    assert not [sql for sql in statements if sql.startswith("INSERT")]
    assert len(statements) <= 2, statements
    assert InboxEvent.objects.filter(source=source).count() == 7000
