"""Our sender delivers to our receiver, which processes exactly once."""

from typing import Any

import pytest

from deliveries import services as sending
from deliveries.models import Delivery, DeliveryStatus
from examples.payments.models import Order, OrderStatus, PaymentTransition
from receivers import services
from receivers.models import InboxEvent, InboxStatus
from tests.conftest import wait_until
from tests.helpers import replay_one


@pytest.mark.django_db(transaction=True)
def test_sender_to_receiver_processes_exactly_once(celery_worker: object, live_server: Any) -> None:
    order = Order.objects.create(reference="ord_1", amount=1000, currency="EUR")
    source, _ = services.source_create(slug="shop", scheme="ours")
    endpoint, endpoint_secret = sending.endpoint_create(
        url=f"{live_server.url}/receivers/shop/", event_types=["payment.*"]
    )
    # The receiving side is configured with the secret the sending side showed.
    services.source_rotate_secret(source=source, secret=endpoint_secret, grace_seconds=0)

    data = {"payment_id": "pay_9", "order": "ord_1", "amount": 1000, "currency": "EUR"}
    sending.emit("payment.created", {**data, "version": 1})
    paid = sending.emit("payment.succeeded", {**data, "version": 2})

    wait_until(
        lambda: InboxEvent.objects.filter(event_id=str(paid.id), status="processed").exists(),
        timeout=30,
        what="the paid event processed",
    )
    order.refresh_from_db()
    assert order.status == OrderStatus.PAID
    # The two events may be processed in either order (a payment.succeeded seen before its
    # payment.created is retried as a missing predecessor), so count the paid event's
    # processing attempts now: the duplicate below must not add one.
    paid_attempts = InboxEvent.objects.get(event_id=str(paid.id)).attempts

    # The sender replays the delivery: same X-Webhook-Id, a duplicate for the receiver.
    delivery = Delivery.objects.get(event=paid)
    replay_one(paid, delivery.endpoint_id)
    wait_until(
        lambda: Delivery.objects.filter(
            event=paid, is_replay=True, status=DeliveryStatus.SUCCEEDED
        ).exists(),
        timeout=30,
        what="the replayed delivery",
    )
    assert InboxEvent.objects.filter(source=source).count() == 2
    assert InboxEvent.objects.get(event_id=str(paid.id)).attempts == paid_attempts
    assert set(InboxEvent.objects.values_list("status", flat=True)) == {InboxStatus.PROCESSED}
    assert PaymentTransition.objects.filter(to_status="succeeded").count() == 1
    assert endpoint.pk
