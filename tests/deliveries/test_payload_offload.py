"""Large payloads go to Django's storage; the row keeps a reference and a sha256.

Real stack: PostgreSQL, Redis, a Celery worker, an HTTP receiver, the file system storage
under a temporary MEDIA_ROOT.
"""

import hashlib
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import storages
from django.db import transaction
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings

from deliveries import services
from deliveries.models import ApiToken, Attempt, Delivery, DeliveryStatus, Event
from deliveries.pipeline import payloads
from deliveries.pipeline.wire import render_body
from tests.conftest import wait_until
from tests.deliveries.helpers import verify_v1_independently
from tests.fixtures import api_client, make_endpoint
from tests.receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)

THRESHOLD = 1024
# Keys already in jsonb's order (shorter first), so the inline twin keeps the same order.
LARGE: dict[str, Any] = {
    "n": 7,
    "items": [{"sku": f"sku-{i}", "label": "crème brûlée"} for i in range(100)],
}
SMALL: dict[str, Any] = {"n": 1}


@pytest.fixture(autouse=True)
def offload_to_tmp(settings: Settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = str(tmp_path)
    settings.WEBHOOKS_PAYLOAD_OFFLOAD_BYTES = THRESHOLD
    return tmp_path


def stored_file(event: Event) -> Path:
    return Path(storages["default"].path(event.data_ref))


def test_large_event_is_stored_as_a_file_with_reference_and_hash() -> None:
    event = services.emit("order.created", LARGE)

    row = Event.objects.get(pk=event.pk)
    assert row.data is None
    assert row.data_ref == f"webhook-payloads/{event.id}.json"
    blob = stored_file(row).read_bytes()
    assert len(blob) > THRESHOLD
    assert row.data_sha256 == hashlib.sha256(blob).hexdigest()
    assert payloads.load(row) == LARGE


def test_small_events_stay_inline_and_zero_threshold_never_offloads(
    settings: Settings, offload_to_tmp: Path
) -> None:
    small = Event.objects.get(pk=services.emit("order.created", SMALL).pk)
    assert (small.data, small.data_ref, small.data_sha256) == (SMALL, "", "")

    settings.WEBHOOKS_PAYLOAD_OFFLOAD_BYTES = 0
    large = Event.objects.get(pk=services.emit("order.created", LARGE).pk)
    assert (large.data, large.data_ref) == (LARGE, "")
    assert not any(offload_to_tmp.rglob("*.json"))


def test_offloaded_event_is_delivered_with_the_bytes_an_inline_one_would_have(
    celery_worker: object, receiver: Receiver, settings: Settings
) -> None:
    _, secret = make_endpoint(receiver, event_types=["order.*"])
    with transaction.atomic():
        offloaded = services.emit("order.created", LARGE)
    settings.WEBHOOKS_PAYLOAD_OFFLOAD_BYTES = 0
    with transaction.atomic():
        inline = services.emit("order.paid", LARGE)

    requests = receiver.wait_for(2)
    by_id = {r.headers["X-Webhook-Id"]: r for r in requests}
    sent_offloaded, sent_inline = by_id[str(offloaded.id)], by_id[str(inline.id)]
    assert Event.objects.get(pk=offloaded.pk).data_ref
    assert not Event.objects.get(pk=inline.pk).data_ref

    assert verify_v1_independently(secret, sent_offloaded.headers, sent_offloaded.body)
    assert sent_offloaded.body == render_body(Event.objects.get(pk=offloaded.pk))
    # "data" comes last in the envelope: its bytes are the same whichever way it was stored.
    assert sent_offloaded.body.split(b',"data":', 1)[1] == sent_inline.body.split(b',"data":', 1)[1]
    assert json.loads(sent_offloaded.body)["data"] == LARGE


def test_tampered_file_fails_the_attempt_without_sending_then_retries(
    celery_worker: object, receiver: Receiver
) -> None:
    make_endpoint(
        receiver,
        event_types=["order.*"],
        max_attempts=50,
        backoff_base_seconds=0.3,
        backoff_max_seconds=0.5,
    )
    with transaction.atomic():
        event = services.emit("order.created", LARGE)
        path = stored_file(event)
        original = path.read_bytes()
        path.write_bytes(original.replace(b'"n":7', b'"n":8'))

    def failed_on_hash() -> bool:
        delivery = Delivery.objects.filter(event=event).first()
        return delivery is not None and "does not match its sha256" in delivery.last_error

    wait_until(failed_on_hash, what="attempt failed on the hash")
    delivery = Delivery.objects.get(event=event)
    assert delivery.status in (DeliveryStatus.PENDING, DeliveryStatus.SENDING)
    assert receiver.requests == []  # nothing sent with wrong data
    assert not Attempt.objects.filter(delivery=delivery).exists()  # no HTTP try made

    path.write_bytes(original)  # the operator restores the file: the retry delivers
    [request] = receiver.wait_for(1)
    assert json.loads(request.body)["data"] == LARGE
    wait_until(
        lambda: Delivery.objects.filter(event=event, status=DeliveryStatus.SUCCEEDED).exists(),
        what="delivery succeeded",
    )


def test_missing_file_is_a_clear_error(offload_to_tmp: Path) -> None:
    event = services.emit("order.created", LARGE)
    stored_file(event).unlink()
    with pytest.raises(payloads.PayloadUnavailable, match="cannot be read"):
        payloads.load(Event.objects.get(pk=event.pk))


def test_purge_deletes_the_stored_file_with_the_event(settings: Settings) -> None:
    settings.WEBHOOKS_EVENT_RETENTION_DAYS = 30
    old = services.emit("order.created", LARGE)
    fresh = services.emit("order.created", LARGE)
    long_ago = timezone.now() - timedelta(days=40)
    Event.objects.filter(pk=old.pk).update(created_at=long_ago, fanned_out_at=long_ago)

    services.purge_expired()

    assert not Event.objects.filter(pk=old.pk).exists()
    assert not stored_file(old).exists()
    assert stored_file(fresh).exists()


def test_api_and_admin_show_offloaded_data(admin_user: Any) -> None:
    event = services.emit("order.created", LARGE)
    _, token = ApiToken.issue("tests")
    api = api_client(token)
    answer = api.get(f"/api/v1/events/{event.id}")
    assert answer.status_code == 200
    assert json.loads(answer.content)["data"] == LARGE

    stored_file(event).write_bytes(b"{}")  # tampered: shown as unavailable, never a 500
    answer = api.get(f"/api/v1/events/{event.id}")
    assert answer.status_code == 200
    assert json.loads(answer.content)["data"] is None

    browser = Client()
    browser.force_login(admin_user)
    page = browser.get(f"/admin/deliveries/event/{event.id}/change/")
    assert page.status_code == 200
    assert b"does not match its sha256" in page.content
