"""The sending pipeline end to end: real PostgreSQL, Redis, Celery worker and HTTP receiver.

Each DESIGN.md invariant has a test here that fails without it; the rollback and
worker-SIGKILL cases live in the fault-injection suite (tests/faults/).
"""

import json
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from deliveries import services
from deliveries.endpoints.headers import MASK
from deliveries.models import Attempt, Delivery, DeliveryStatus, Endpoint, EndpointState, Event
from deliveries.tasks import work_endpoint
from tests.conftest import wait_until
from tests.deliveries.helpers import settled, verify_v1_independently
from tests.fixtures import make_endpoint
from tests.helpers import sweeping_in_background
from tests.receiver import Receiver, Reply
from webhooks_core.crypto import encryption

pytestmark = pytest.mark.django_db(transaction=True)


def delivery_of(event: Event) -> Delivery:
    return Delivery.objects.get(event=event)


def test_committed_event_is_delivered_signed_and_recorded(
    celery_worker: object, receiver: Receiver
) -> None:
    endpoint, secret = make_endpoint(receiver, event_types=["invoice.*"])

    with transaction.atomic():
        event = services.emit("invoice.paid", {"invoice": "in_1", "amount": 4200})

    [request] = receiver.wait_for(1)
    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="delivery succeeded")

    headers = request.headers
    assert headers["X-Webhook-Id"] == str(event.id)
    assert headers["X-Webhook-Event"] == "invoice.paid"
    assert headers["X-Webhook-Replay"] == "false"
    assert headers["Content-Type"] == "application/json"
    assert abs(int(headers["X-Webhook-Timestamp"]) - time.time()) < 30
    body = json.loads(request.body)
    assert body == {
        "id": str(event.id),
        "type": "invoice.paid",
        "version": 1,
        "occurred_at": body["occurred_at"],
        "data": {"invoice": "in_1", "amount": 4200},
    }
    assert body["occurred_at"].endswith("Z")
    assert b" " not in request.body  # compact JSON
    assert verify_v1_independently(secret, headers, request.body)
    Webhook(secret).verify(request.body, headers)

    [attempt] = Attempt.objects.filter(delivery__event=event)
    assert attempt.number == 1
    assert attempt.response_status == 200
    assert attempt.response_body == "ok"
    assert attempt.duration_ms > 0
    assert attempt.request_headers["X-Webhook-Signature"] == "<redacted>"
    assert attempt.request_headers["webhook-signature"] == "<redacted>"
    assert secret not in json.dumps(attempt.request_headers)
    endpoint.refresh_from_db()
    assert endpoint.last_success_at is not None


def test_retry_then_success_keeps_the_same_id(celery_worker: object, receiver: Receiver) -> None:
    make_endpoint(receiver)
    receiver.script(500, Reply(status=502, body=b"bad gateway"), 200)

    event = services.emit("order.created", {"id": 7})

    requests = receiver.wait_for(3)
    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="success after retries")
    assert {r.headers["X-Webhook-Id"] for r in requests} == {str(event.id)}
    delivery = delivery_of(event)
    assert delivery.attempts == 3
    statuses = list(delivery.attempt_set.values_list("number", "response_status"))
    assert statuses == [(1, 500), (2, 502), (3, 200)]
    assert delivery.attempt_set.get(number=2).response_body == "bad gateway"


def test_gone_dead_letters_and_suspends_the_endpoint(
    celery_worker: object, receiver: Receiver
) -> None:
    endpoint, _ = make_endpoint(receiver)
    receiver.default = Reply(status=410)

    event = services.emit("order.created", {"id": 1})

    wait_until(lambda: settled(event, DeliveryStatus.DEAD_LETTERED), what="dead letter")
    endpoint.refresh_from_db()
    assert endpoint.state == EndpointState.SUSPENDED
    assert "410" in endpoint.state_reason
    # Later events are held for the suspended endpoint, not sent.
    later = services.emit("order.created", {"id": 2})
    wait_until(lambda: settled(later, DeliveryStatus.HELD), what="held delivery")
    assert len(receiver.requests) == 1


def test_unauthorized_dead_letters_at_once(celery_worker: object, receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver)
    receiver.default = Reply(status=401)

    event = services.emit("order.created", {"id": 1})

    wait_until(lambda: settled(event, DeliveryStatus.DEAD_LETTERED), what="dead letter")
    time.sleep(0.3)
    assert len(receiver.requests) == 1
    endpoint.refresh_from_db()
    assert endpoint.state == EndpointState.ACTIVE
    assert delivery_of(event).last_status_code == 401


def test_timeouts_are_retried(celery_worker: object, receiver: Receiver) -> None:
    make_endpoint(receiver, read_timeout_seconds=0.3)
    receiver.script(Reply(delay_seconds=1.0), 200)

    event = services.emit("order.created", {"id": 1})

    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="success after timeout")
    first, second = delivery_of(event).attempt_set.order_by("number")
    assert first.response_status is None
    assert "Timeout" in first.error
    assert second.response_status == 200


def test_retry_after_is_honoured(celery_worker: object, receiver: Receiver) -> None:
    make_endpoint(receiver, backoff_max_seconds=5.0)
    receiver.script(Reply(status=429, headers={"Retry-After": "1"}), 200)

    event = services.emit("order.created", {"id": 1})

    first, second = receiver.wait_for(2)
    assert second.received_at - first.received_at >= 0.9
    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="success")


def test_a_retry_after_no_calendar_holds_is_recorded_and_the_backoff_applies(
    celery_worker: object, receiver: Receiver
) -> None:
    make_endpoint(receiver)
    absurd = "Mon, 1 Jan 99999999999 00:00:00 GMT"
    receiver.script(Reply(status=503, headers={"Retry-After": absurd}), 200)

    event = services.emit("order.created", {"id": 1})

    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="success after the 503")
    delivery = delivery_of(event)
    assert list(delivery.attempt_set.values_list("number", "response_status")) == [
        (1, 503),
        (2, 200),
    ]
    assert delivery.attempts == 2
    assert len(receiver.requests) == 2


def test_exhausted_attempts_dead_letter(celery_worker: object, receiver: Receiver) -> None:
    make_endpoint(receiver, max_attempts=3)
    receiver.default = Reply(status=500)

    event = services.emit("order.created", {"id": 1})

    wait_until(lambda: settled(event, DeliveryStatus.DEAD_LETTERED), what="dead letter")
    time.sleep(0.5)
    assert len(receiver.requests) == 3
    delivery = delivery_of(event)
    assert delivery.attempts == 3
    assert "gave up after 3 attempts" in delivery.last_error


def test_duplicate_task_messages_send_once(celery_worker: object, receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver)
    receiver.default = Reply(delay_seconds=0.5)
    event = Event.objects.create(
        type="order.created", data={}, occurred_at=timezone.now(), fanned_out_at=timezone.now()
    )
    delivery = Delivery.objects.create(
        event=event, endpoint=endpoint, next_attempt_at=timezone.now()
    )

    for _ in range(6):  # six messages for the same endpoint, past the deduplication
        work_endpoint.delay(str(endpoint.pk))

    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="success")
    time.sleep(1.0)
    assert len(receiver.requests) == 1
    assert Attempt.objects.filter(delivery=delivery).count() == 1


def test_secret_rotation_signs_with_both_during_grace_then_only_the_new(
    celery_worker: object, receiver: Receiver
) -> None:
    endpoint, old_secret = make_endpoint(receiver)
    new_secret, _ = services.endpoint_rotate_secret(endpoint=endpoint, grace_seconds=3600)

    services.emit("order.created", {"id": 1})
    [during] = receiver.wait_for(1)
    assert during.headers["X-Webhook-Signature"].count("v1=") == 2
    assert verify_v1_independently(old_secret, during.headers, during.body)
    assert verify_v1_independently(new_secret, during.headers, during.body)
    Webhook(old_secret).verify(during.body, during.headers)
    Webhook(new_secret).verify(during.body, during.headers)

    endpoint.secrets.exclude(expires_at__isnull=True).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    services.emit("order.created", {"id": 2})
    _, after = receiver.wait_for(2)
    assert after.headers["X-Webhook-Signature"].count("v1=") == 1
    assert verify_v1_independently(new_secret, after.headers, after.body)
    assert not verify_v1_independently(old_secret, after.headers, after.body)


def test_custom_headers_are_sent_but_cannot_forge_ours(
    celery_worker: object, receiver: Receiver
) -> None:
    endpoint, secret = make_endpoint(receiver, custom_headers={"X-Tenant": "acme"})
    # The services refuse the forged header; written past them, ours still win on the wire.
    Endpoint.objects.filter(pk=endpoint.pk).update(
        custom_headers={"X-Tenant": "acme", "x-webhook-signature": "forged"}
    )

    services.emit("order.created", {"id": 1})

    [request] = receiver.wait_for(1)
    assert request.headers["X-Tenant"] == "acme"
    assert verify_v1_independently(secret, request.headers, request.body)


def test_idempotency_key_returns_the_first_event(celery_worker: object, receiver: Receiver) -> None:
    make_endpoint(receiver)

    first = services.emit("order.created", {"id": 1}, idempotency_key="order-1-created")
    second = services.emit("order.created", {"id": 1}, idempotency_key="order-1-created")

    assert first.id == second.id
    receiver.wait_for(1)
    time.sleep(0.5)
    assert len(receiver.requests) == 1
    assert Event.objects.count() == 1


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("", {}), "type"),
        (("order created", {}), "type"),
        (("order.created", {"when": object()}), "data"),
        (("order.created", {"n": float("nan")}), "data"),
        (("order.created", {"text": "a\x00b"}), "data"),
        (("order.created", {"key\x00": 1}), "data"),
        (("order.created", ["\ud800"]), "data"),
        (("order.created\x00", {}), "type"),
    ],
)
def test_invalid_events_raise_and_write_nothing(args: tuple[str, Any], field: str) -> None:
    with pytest.raises(services.EventRefused) as raised:
        services.emit(*args)
    assert raised.value.field == field
    assert not Event.objects.exists()


def test_sweeper_fans_out_events_whose_message_was_lost(
    celery_worker: object, receiver: Receiver, fast_sweeps: None
) -> None:
    make_endpoint(receiver)
    # As if the broker lost the fan-out message: the row exists, nothing was dispatched.
    event = Event.objects.create(type="order.created", data={"id": 1}, occurred_at=timezone.now())
    Event.objects.filter(pk=event.pk).update(created_at=timezone.now() - timedelta(seconds=5))

    services.sweep()

    receiver.wait_for(1)
    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="success")


def test_long_waits_stay_in_the_database_until_the_sweeper_wakes_them(
    celery_worker: object, receiver: Receiver, settings: Any, fast_sweeps: None
) -> None:
    settings.WEBHOOKS_MAX_COUNTDOWN_SECONDS = 0.01
    make_endpoint(receiver, backoff_base_seconds=0.3, backoff_max_seconds=0.5)
    receiver.script(500, 200)

    event = services.emit("order.created", {"id": 1})

    wait_until(
        lambda: Delivery.objects.filter(event=event, attempts=1, status="pending").exists(),
        what="the first attempt to fail",
    )
    delivery = delivery_of(event)
    assert delivery.dispatched_at is None, "a long wait must not be a countdown message"
    time.sleep(1.0)
    assert len(receiver.requests) == 1, "nothing may send it but the sweeper"

    assert services.sweep().deliveries_due == 1
    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="success")
    assert len(receiver.requests) == 2


def test_redis_flushall_mid_run_loses_nothing(
    celery_worker: object, receiver: Receiver, fast_sweeps: None, redis_client: Any
) -> None:
    make_endpoint(receiver)
    receiver.default = Reply(delay_seconds=0.2)
    count = 30
    with transaction.atomic():
        events = [services.emit("order.created", {"n": n}) for n in range(count)]

    receiver.wait_for(2)
    redis_client.flushall()  # every queued and unacknowledged message is gone

    with sweeping_in_background():
        wait_until(
            lambda: Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count() == count,
            timeout=60,
            what="every delivery to succeed",
        )
    arrived = {r.headers["X-Webhook-Id"] for r in receiver.requests}
    assert arrived == {str(e.id) for e in events}


def test_nul_bytes_in_a_response_are_recorded_not_fatal(
    celery_worker: object, receiver: Receiver
) -> None:
    make_endpoint(receiver)
    receiver.default = Reply(status=200, body=b"ok\x00!")

    event = services.emit("order.created", {"id": 1})

    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="success")
    assert delivery_of(event).attempt_set.get().response_body == "ok\ufffd!"


def test_a_held_delivery_spends_neither_attempts_nor_its_retry_window(
    receiver: Receiver,
) -> None:
    endpoint, _ = make_endpoint(receiver)
    services.endpoint_suspend(endpoint_id=endpoint.pk, reason="test")
    event = Event.objects.create(
        type="order.created", data={}, occurred_at=timezone.now(), fanned_out_at=timezone.now()
    )
    delivery = Delivery.objects.create(
        event=event, endpoint=endpoint, next_attempt_at=timezone.now()
    )

    assert (
        services.endpoint_work_for_delivery(delivery_id=delivery.pk)
        == services.DeliveryOutcome.HELD
    )

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.first_attempt_at) == ("held", 0, None)
    with pytest.raises(services.DeliveryNotRetryable):
        services.delivery_retry(delivery_id=delivery.pk)
    assert receiver.requests == []


def test_one_transaction_of_many_events_is_fanned_out_completely(
    celery_worker: object, receiver: Receiver
) -> None:
    make_endpoint(receiver)
    with transaction.atomic():
        events = [services.emit("order.created", {"n": n}) for n in range(250)]

    wait_until(
        lambda: Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count() == 250,
        timeout=60,
        what="every delivery to succeed",
    )
    assert {r.headers["X-Webhook-Id"] for r in receiver.requests} == {str(e.id) for e in events}


def test_an_exception_while_sending_is_a_recorded_failed_attempt_never_stuck_sending(
    celery_worker: object, receiver: Receiver
) -> None:
    """A header value outside Latin-1 (written past the services, which
    refuse it) made the send raise: no attempt, the rows stuck in `sending`, the same
    crash after every lease expiry. Now each delivery records the error and retries."""
    endpoint, _ = make_endpoint(receiver, max_attempts=2)
    Endpoint.objects.filter(pk=endpoint.pk).update(custom_headers={"X-Price": "price €5"})
    with transaction.atomic():
        first = services.emit("order.created", {"id": 1})
        second = services.emit("order.created", {"id": 2})

    def both_dead_lettered() -> bool:
        return all(settled(e, DeliveryStatus.DEAD_LETTERED) for e in (first, second))

    wait_until(both_dead_lettered, what="the failing deliveries to use their attempts up")
    for event in (first, second):
        delivery = delivery_of(event)
        assert delivery.attempts == 2
        assert "UnicodeEncodeError" in delivery.last_error
        attempts = list(Attempt.objects.filter(delivery=delivery).order_by("number"))
        assert [a.number for a in attempts] == [1, 2]
        assert all("UnicodeEncodeError" in a.error for a in attempts)
    assert receiver.requests == []
    assert not Delivery.objects.filter(status=DeliveryStatus.SENDING).exists()
    # Our failure, not the endpoint's: its health counters are untouched.
    endpoint.refresh_from_db()
    assert endpoint.consecutive_failures == 0
    assert endpoint.state == EndpointState.ACTIVE


def test_a_send_error_quoting_a_secret_header_records_it_redacted(
    celery_worker: object, receiver: Receiver
) -> None:
    # `requests` quotes a bad header value in its exception; the attempt and the log get
    # the error without the credential.
    endpoint, _ = make_endpoint(receiver, max_attempts=1)
    Endpoint.objects.filter(pk=endpoint.pk).update(
        secret_custom_headers={"Authorization": encryption.encrypt("Bearer s3cr3t-t0ken\n")}
    )
    event = services.emit("order.created", {"id": 1})

    wait_until(lambda: settled(event, DeliveryStatus.DEAD_LETTERED), what="the dead letter")
    attempt = Attempt.objects.get(delivery=delivery_of(event))
    assert "InvalidHeader" in attempt.error
    assert "s3cr3t-t0ken" not in attempt.error
    assert "s3cr3t-t0ken" not in delivery_of(event).last_error
    assert MASK in attempt.error
