"""Endpoint options end to end (real worker, PostgreSQL, Redis, HTTP receiver): payload
filters at fan-out and replay, v1a signatures verified with the public key alone, the
CloudEvents envelope."""

import base64
import json
from datetime import timedelta
from typing import Any

import pytest
from cloudevents.core.bindings.http import HTTPMessage, from_http_event
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus, Endpoint, EndpointSigningKey, Event
from tests.conftest import wait_until
from tests.deliveries.helpers import settled, verify_v1_independently
from tests.fixtures import make_endpoint
from tests.receiver import ReceivedRequest, Receiver

pytestmark = pytest.mark.django_db(transaction=True)


def verify_v1a_as_a_consumer(public_key: str, request: ReceivedRequest) -> bool:
    """What the docs tell a consumer to write: `cryptography` and the headers, no ours."""
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key.removeprefix("whpk_")))
    signed = (
        f"{request.headers['webhook-id']}.{request.headers['webhook-timestamp']}.".encode()
        + request.body
    )
    for entry in request.headers["webhook-signature"].split():
        version, _, signature = entry.partition(",")
        if version != "v1a":
            continue
        try:
            key.verify(base64.b64decode(signature), signed)
        except Exception:  # noqa: S112 (InvalidSignature, or a malformed entry)
            continue
        return True
    return False


def fanned_out(event: Event) -> bool:
    return Event.objects.filter(pk=event.pk, fanned_out_at__isnull=False).exists()


# --- payload filters -------------------------------------------------------------------


def test_an_event_the_filter_refuses_creates_no_delivery(
    celery_worker: object, receiver: Receiver
) -> None:
    big, _ = make_endpoint(
        receiver,
        event_types=["invoice.*"],
        filter={"data.amount": {"$gte": 100}, "data.currency": {"$in": ["EUR", "USD"]}},
    )
    everything, _ = make_endpoint(receiver, event_types=["invoice.*"])

    small = services.emit("invoice.paid", {"amount": 5, "currency": "EUR"})
    large = services.emit("invoice.paid", {"amount": 500, "currency": "EUR"})

    wait_until(lambda: fanned_out(small) and fanned_out(large), what="both fanned out")
    wait_until(lambda: settled(large, DeliveryStatus.SUCCEEDED), what="large delivered")
    assert set(Delivery.objects.filter(event=small).values_list("endpoint", flat=True)) == {
        everything.pk
    }
    assert set(Delivery.objects.filter(event=large).values_list("endpoint", flat=True)) == {
        everything.pk,
        big.pk,
    }
    receiver.wait_for(3)
    wait_until(
        lambda: Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count() == 3,
        what="three deliveries succeeded",
    )


def test_a_replay_applies_the_endpoints_current_filter(
    celery_worker: object, receiver: Receiver
) -> None:
    endpoint, _ = make_endpoint(receiver, event_types=["order.*"], filter={"data.n": 1})
    since = timezone.now() - timedelta(seconds=1)
    one = services.emit("order.created", {"n": 1})
    two = services.emit("order.created", {"n": 2})
    wait_until(lambda: settled(one, DeliveryStatus.SUCCEEDED), what="first delivered")
    wait_until(lambda: fanned_out(two), what="second fanned out")
    assert not Delivery.objects.filter(event=two).exists()

    Endpoint.objects.filter(pk=endpoint.pk).update(filter={"data.n": {"$gte": 2}})
    replay, _ = services.replay_create(
        filters=services.ReplayFilters(since=since, until=timezone.now()),
        requested_via="test",
    )

    wait_until(
        lambda: Delivery.objects.filter(is_replay=True, status=DeliveryStatus.SUCCEEDED).exists(),
        what="the replayed delivery",
    )
    replayed = Delivery.objects.filter(replay=replay)
    assert [d.event_id for d in replayed] == [two.pk]
    replay.refresh_from_db()
    assert replay.events_done == 1
    assert replay.deliveries_created == 1


# --- v1a signatures --------------------------------------------------------------------


def test_a_v1a_delivery_verifies_with_the_public_key(
    celery_worker: object, receiver: Receiver
) -> None:
    endpoint, secret = make_endpoint(receiver, signature_scheme="v1a")
    public_key = services.endpoint_public_key(endpoint=endpoint)
    assert public_key is not None
    assert public_key.startswith("whpk_")
    key_row = EndpointSigningKey.objects.get(endpoint=endpoint)
    assert "whsk_" not in key_row.encrypted_value  # encrypted at rest

    event = services.emit("invoice.paid", {"amount": 1})
    [request] = receiver.wait_for(1)
    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="delivered")

    entries = request.headers["webhook-signature"].split()
    assert [e.split(",")[0] for e in entries] == ["v1a"]
    assert verify_v1a_as_a_consumer(public_key, request)
    # The classic header stays HMAC with the secret.
    assert verify_v1_independently(secret, request.headers, request.body)


def test_both_schemes_verify_with_their_own_tools(
    celery_worker: object, receiver: Receiver
) -> None:
    endpoint, secret = make_endpoint(receiver, signature_scheme="v1,v1a")
    public_key = services.endpoint_public_key(endpoint=endpoint)
    assert public_key is not None
    event = services.emit("invoice.paid", {"amount": 1})
    [request] = receiver.wait_for(1)
    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="delivered")

    assert [e.split(",")[0] for e in request.headers["webhook-signature"].split()] == [
        "v1",
        "v1a",
    ]
    Webhook(secret).verify(request.body, request.headers)
    assert verify_v1a_as_a_consumer(public_key, request)


def test_the_old_key_keeps_signing_until_it_expires(
    celery_worker: object, receiver: Receiver
) -> None:
    endpoint, _ = make_endpoint(receiver, signature_scheme="v1a")
    old_public = services.endpoint_public_key(endpoint=endpoint)
    new_key = services.endpoint_rotate_signing_key(endpoint=endpoint, grace_seconds=3600)
    assert services.endpoint_public_key(endpoint=endpoint) == new_key.public_key != old_public

    services.emit("invoice.paid", {"during": "grace"})
    [during] = receiver.wait_for(1)
    assert len(during.headers["webhook-signature"].split()) == 2
    assert verify_v1a_as_a_consumer(old_public or "", during)
    assert verify_v1a_as_a_consumer(new_key.public_key, during)

    services.endpoint_rotate_signing_key(endpoint=endpoint, grace_seconds=0)
    newest = services.endpoint_public_key(endpoint=endpoint)
    services.emit("invoice.paid", {"after": "expiry"})
    after = receiver.wait_for(2)[1]
    assert len(after.headers["webhook-signature"].split()) == 1
    assert verify_v1a_as_a_consumer(newest or "", after)
    assert not verify_v1a_as_a_consumer(old_public or "", after)
    assert not verify_v1a_as_a_consumer(new_key.public_key, after)


def test_a_v1a_endpoint_without_an_unexpired_key_dead_letters_unsent(
    celery_worker: object, receiver: Receiver
) -> None:
    endpoint, _ = make_endpoint(receiver, signature_scheme="v1a")
    EndpointSigningKey.objects.filter(endpoint=endpoint).update(expires_at=timezone.now())
    event = services.emit("invoice.paid", {})
    wait_until(lambda: settled(event, DeliveryStatus.DEAD_LETTERED), what="dead-lettered")
    assert Delivery.objects.get(event=event).last_error.startswith("no unexpired v1a signing key")
    assert receiver.requests == []


# --- CloudEvents -----------------------------------------------------------------------


def test_a_cloudevents_delivery_parses_and_verifies(
    celery_worker: object, receiver: Receiver, settings: Any
) -> None:
    settings.WEBHOOKS_CLOUDEVENTS_SOURCE = "https://shop.example/webhooks"
    _, secret = make_endpoint(receiver, envelope="cloudevents")
    event = services.emit("invoice.paid", {"amount": 4200, "note": "café"})
    [request] = receiver.wait_for(1)
    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="delivered")

    assert request.headers["Content-Type"] == "application/cloudevents+json"
    document = json.loads(request.body)
    assert document == {
        "specversion": "1.0",
        "id": str(event.id),
        "source": "https://shop.example/webhooks",
        "type": "invoice.paid",
        "time": event.occurred_at.isoformat().replace("+00:00", "Z"),
        "datacontenttype": "application/json",
        "dataversion": 1,
        "data": {"amount": 4200, "note": "café"},
    }
    assert request.headers["webhook-id"] == document["id"]
    Webhook(secret).verify(request.body, request.headers)
    # The CloudEvents SDK reads it as a structured-mode v1.0 event.
    parsed = from_http_event(HTTPMessage(headers=request.headers, body=request.body))
    assert parsed.get_id() == str(event.id)
    assert parsed.get_type() == "invoice.paid"
    assert parsed.get_source() == "https://shop.example/webhooks"
    assert parsed.get_extension("dataversion") == 1
    assert parsed.get_data() == {"amount": 4200, "note": "café"}
    assert parsed.get_time() == event.occurred_at


def test_filters_read_an_offloaded_payload(
    celery_worker: object, receiver: Receiver, settings: Any, tmp_path: Any
) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    settings.WEBHOOKS_PAYLOAD_OFFLOAD_BYTES = 256
    make_endpoint(receiver, event_types=["order.*"], filter={"data.n": {"$gt": 5}})
    large = [{"sku": f"sku-{i}", "label": "crème brûlée"} for i in range(20)]

    kept = services.emit("order.created", {"n": 7, "items": large})
    dropped = services.emit("order.created", {"n": 1, "items": large})

    assert Event.objects.get(pk=kept.pk).data_ref  # offloaded, so the filter loads it
    wait_until(lambda: settled(kept, DeliveryStatus.SUCCEEDED), what="the matching one sent")
    wait_until(lambda: fanned_out(dropped), what="the other fanned out")
    assert not Delivery.objects.filter(event=dropped).exists()


def test_an_unreadable_payload_is_let_through_not_lost(
    receiver: Receiver, settings: Any, tmp_path: Any
) -> None:
    """The filter cannot be evaluated: the delivery is made (and shows the storage error
    when it is attempted) instead of the fan-out failing for ever."""
    settings.MEDIA_ROOT = str(tmp_path)
    settings.WEBHOOKS_PAYLOAD_OFFLOAD_BYTES = 256
    # The fan-out task's case: in the emitting transaction the payload is still at hand.
    settings.WEBHOOKS_INLINE_FAN_OUT_MAX_ENDPOINTS = 0
    endpoint, _ = make_endpoint(receiver, event_types=["order.*"], filter={"data.n": 1})
    event = services.emit("order.created", {"n": 2, "pad": "x" * 400})
    for stored in tmp_path.rglob("*.json"):
        stored.unlink()

    assert services.event_fan_out(event_id=event.pk) == 1
    assert Delivery.objects.get(event=event).endpoint_id == endpoint.pk
