"""What the sending side's tests share: checking a delivery's signature, waiting for
deliveries, answering the validation handshake, rows and owners for the owner's tests."""

import hashlib
import hmac
import threading
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from django.db.models.functions import Now
from django.utils import timezone

from deliveries import services
from deliveries.models import (
    Delivery,
    DeliveryStatus,
    Endpoint,
    Event,
)
from tests.conftest import wait_until
from tests.receiver import ReceivedRequest, Receiver, Reply


def settled(event: Event, status: str) -> bool:
    return Delivery.objects.filter(event=event, status=status).exists()


def verify_v1_independently(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """The recipe of docs/wire-format.md, from scratch: HMAC-SHA256(secret, "<t>.<body>")."""
    parts = [p.split("=", 1) for p in headers["X-Webhook-Signature"].split(",")]
    timestamp = next(v for k, v in parts if k == "t")
    expected = hmac.new(
        secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256
    ).hexdigest()
    return any(hmac.compare_digest(expected, v) for k, v in parts if k == "v1")


ORIGIN = "hooks.test.example"


def consent(allowed_origin: str = ORIGIN, rate: str = "*") -> Callable[[ReceivedRequest], Reply]:
    def answer(request: ReceivedRequest) -> Reply:
        return Reply(
            200,
            b"",
            {
                "WebHook-Allowed-Origin": allowed_origin,
                "WebHook-Allowed-Rate": rate,
                "Allow": "POST",
            },
        )

    return answer


def ok_without_consent(request: ReceivedRequest) -> Reply:
    return Reply(200, b"ok", {"Allow": "POST, OPTIONS"})


def succeeded_count(endpoint: Endpoint) -> int:
    return Delivery.objects.filter(endpoint=endpoint, status=DeliveryStatus.SUCCEEDED).count()


def emit_and_wait_for_arrivals(endpoint: Endpoint, receiver: Receiver, count: int) -> list[float]:
    """`count` events in one transaction, all delivered to the endpoint: their arrival
    times (each arrived once)."""
    with transaction.atomic():
        for n in range(count):
            services.emit("order.created", {"n": n})
    wait_until(lambda: succeeded_count(endpoint) == count, timeout=60, what="all delivered")
    arrivals = [r.received_at for r in receiver.requests]
    assert len(arrivals) == count
    return arrivals


def max_in_any_window(times: list[float], seconds: float) -> int:
    times = sorted(times)
    return max(
        sum(1 for other in times[i:] if other < start + seconds) for i, start in enumerate(times)
    )


def delivery_row(endpoint: Endpoint, **fields: Any) -> Delivery:
    """A delivery of a new event to the endpoint: pending and due now unless `fields` say
    otherwise."""
    event = Event.objects.create(type="order.created", data={}, occurred_at=timezone.now())
    return Delivery.objects.create(
        event=event, endpoint=endpoint, **{"next_attempt_at": Now(), **fields}
    )


def in_its_own_connection(target: Callable[[], object]) -> threading.Thread:
    """A thread (not started) running `target` on a database connection of its own,
    closed when it ends."""

    def run() -> None:
        try:
            target()
        finally:
            connection.close()

    return threading.Thread(target=run)


def owner_at_work(endpoint: Endpoint) -> threading.Thread:
    """The endpoint's owner working in a thread of its own (started)."""
    worker = in_its_own_connection(lambda: services.endpoint_work(endpoint_id=endpoint.pk))
    worker.start()
    return worker
