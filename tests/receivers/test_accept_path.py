"""The accept path kept lean (docs/receiving.md): few statements, exact source and secret state,
batched processing messages, and no 500 for a signed body the database cannot store."""

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from receivers import schemes, services
from receivers.models import InboxEvent, InboxStatus, SourceSecret
from receivers.services import dispatch
from tests.conftest import wait_until
from tests.fixtures import MakeSource
from tests.receivers.conftest import post
from tests.receivers.helpers import ours_event, sign_ours
from webhooks_core.crypto import encryption
from webhooks_core.crypto.signing import generate_secret


def accept(client: Client, slug: str, secret: str, **kw: Any) -> Any:
    body = ours_event(**kw)
    return post(client, slug, body, sign_ours([secret], body))


@pytest.mark.django_db
def test_an_accepted_event_costs_two_statements_and_a_duplicate_three(
    client: Client, make_source: MakeSource
) -> None:
    source, secret = make_source()
    services.source_rotate_secret(source=source, grace_seconds=3600)  # two active secrets
    accept(client, source.slug, secret)  # connection and caches warm
    body = ours_event()
    with CaptureQueriesContext(connection) as accepted:
        assert post(client, source.slug, body, sign_ours([secret], body)).json() == {
            "status": "accepted"
        }
    with CaptureQueriesContext(connection) as duplicate:
        assert post(client, source.slug, body, sign_ours([secret], body)).json() == {
            "status": "duplicate"
        }
    # The source with its secrets, then INSERT ... ON CONFLICT DO NOTHING RETURNING.
    assert [q["sql"].split()[0] for q in accepted.captured_queries] == ["SELECT", "INSERT"]
    # Only a duplicate reads the stored row back.
    assert len(duplicate.captured_queries) == 3


@pytest.mark.django_db
def test_changes_made_elsewhere_count_at_the_next_request(
    client: Client, make_source: MakeSource
) -> None:
    """Bulk updates send no signal, like a change made by another process: nothing about
    a source is cached, so all of them count."""
    source, old = make_source()
    assert accept(client, source.slug, old).status_code == 200

    new = generate_secret()
    SourceSecret.objects.filter(source=source).update(encrypted_value=encryption.encrypt(new))
    assert accept(client, source.slug, old).status_code == 401
    assert accept(client, source.slug, new).status_code == 200

    SourceSecret.objects.filter(source=source).update(expires_at=source.created_at)
    assert accept(client, source.slug, new).status_code == 401

    SourceSecret.objects.filter(source=source).update(expires_at=None)
    type(source).objects.filter(pk=source.pk).update(enabled=False)
    assert accept(client, source.slug, new).status_code == 404


@pytest.mark.django_db
def test_a_secret_the_configured_key_cannot_decrypt_verifies_nothing(
    client: Client, make_source: MakeSource, settings: Any
) -> None:
    source, secret = make_source()
    assert accept(client, source.slug, secret).status_code == 200
    settings.WEBHOOKS_ENCRYPTION_KEY = encryption.generate_key()  # the stored token is foreign now
    assert accept(client, source.slug, secret).status_code == 401


@pytest.mark.django_db
def test_inside_a_callers_transaction_a_rollback_stores_nothing(make_source: MakeSource) -> None:
    source, _ = make_source()
    envelope = schemes.Envelope(event_id="evt-1", type="payment.created", payload={})

    class Abort(Exception):
        pass

    def record_then_fail() -> None:
        with transaction.atomic():
            services.inbox_record(source=source, envelope=envelope, headers={}, raw_body=b"")
            assert InboxEvent.objects.exists()
            raise Abort

    with pytest.raises(Abort):
        record_then_fail()
    assert not InboxEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_burst_is_processed_through_batched_messages(
    celery_worker: object, live_server: Any, make_source: MakeSource
) -> None:
    """Concurrent requests over real HTTP: every row is processed once, whether its id
    travelled alone or in a batch message."""
    source, secret = make_source()
    bodies = [ours_event("bench.unhandled") for _ in range(40)]

    def send(body: bytes) -> int:
        url = f"{live_server.url}/receivers/{source.slug}/"
        headers = {**sign_ours([secret], body), "Content-Type": "application/json"}
        return requests.post(url, data=body, headers=headers, timeout=10).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert set(pool.map(send, bodies)) == {200}
    rows = InboxEvent.objects.filter(source=source)
    wait_until(
        lambda: not rows.exclude(status=InboxStatus.IGNORED).exists(),
        timeout=30,
        what="every row processed (no handler: ignored)",
    )
    assert rows.count() == 40
    assert set(rows.values_list("attempts", flat=True)) == {1}


@pytest.mark.django_db(transaction=True)
def test_batch_message_processes_each_row(celery_worker: object, make_source: MakeSource) -> None:
    source, _ = make_source()
    ids = []
    for n in range(3):
        envelope = schemes.Envelope(event_id=f"evt-{n}", type="bench.unhandled", payload={})
        ids.append(
            services.inbox_record(source=source, envelope=envelope, headers={}, raw_body=b"")
        )
    # One more message for the same rows, as after a redelivery: claims keep it harmless.
    dispatch.dispatch_batch([str(arrival.inbox_id) for arrival in ids])
    rows = InboxEvent.objects.filter(source=source)
    wait_until(lambda: set(rows.values_list("status", flat=True)) == {InboxStatus.IGNORED})
    time.sleep(0.5)  # room for the second message to run, if it could
    assert set(rows.values_list("attempts", flat=True)) == {1}


def test_flush_pending_waits_until_the_sender_thread_has_dispatched() -> None:
    sender = dispatch.BatchSender()
    assert sender.flush(0.1)  # nothing submitted yet
    for _ in range(3):  # ids of no row: a worker that gets them finds nothing to claim
        sender.submit(str(uuid.uuid4()))
    assert sender.flush(5.0)


UNSTORABLE = [
    '"\\u0000"',
    '"a\\u0000b"',
    '"\\ud800"',
    '"\\udfff tail"',
    "NaN",
    "-Infinity",
    "1e999",
]


@pytest.mark.django_db
@pytest.mark.parametrize("value", UNSTORABLE)
def test_signed_body_the_database_cannot_store_is_400(
    client: Client, make_source: MakeSource, value: str
) -> None:
    source, secret = make_source()
    bodies = [f'{{"id":"evt-1","type":"t","data":{{"v":{value}}}}}']
    if value.startswith('"'):  # a string: as a key too
        bodies.append(f'{{"id":"evt-1","type":"t","data":{{{value}:1}}}}')
    for body in bodies:
        raw = body.encode()
        response = post(client, source.slug, raw, sign_ours([secret], raw))
        assert response.status_code == 400, (body, response.content)
    assert not InboxEvent.objects.exists()


@pytest.mark.django_db
def test_escaped_surrogate_pairs_and_backslashes_are_fine(
    client: Client, make_source: MakeSource
) -> None:
    source, secret = make_source()
    raw = b'{"id":"evt-1","type":"t","data":{"smile":"\\ud83d\\ude00","path":"C:\\\\u0000"}}'
    assert post(client, source.slug, raw, sign_ours([secret], raw)).status_code == 200
    payload = InboxEvent.objects.get().payload
    assert payload is not None
    assert payload["data"] == {"smile": "\U0001f600", "path": "C:\\u0000"}


fragments = st.sampled_from([*UNSTORABLE, '"ok"', "1", "1.5", "true", "null", '"\\ud83d\\ude00"'])


@pytest.mark.django_db
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(fragments, max_size=4), text=st.text(max_size=20))
def test_any_signed_json_body_is_200_or_400_never_500(
    client: Client, make_source: MakeSource, values: list[str], text: str
) -> None:
    source, secret = make_source()
    body = (
        f'{{"id":{json.dumps(str(uuid.uuid4()))},"type":"t","text":{json.dumps(text)},'
        f'"values":[{",".join(values)}]}}'
    ).encode()
    response = post(client, source.slug, body, sign_ours([secret], body))
    assert response.status_code in (200, 400), response.content
