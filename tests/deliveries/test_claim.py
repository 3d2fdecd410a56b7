"""The claim: one statement that takes due rows under a fresh lease. Its plain SQL must
give the answers of the rule it stands for (`webhooks_core.jobs.claimable`)."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus, Event
from deliveries.services.attempt import deliveries_busy_wait
from webhooks_core import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_claim_takes_exactly_the_rows_the_rule_calls_claimable() -> None:
    endpoint, _ = services.endpoint_create(url="http://127.0.0.1:9/hook", event_types=["*"])
    now = timezone.now()
    past, future = now - timedelta(seconds=30), now + timedelta(seconds=30)
    rows: dict[str, dict[str, Any]] = {
        "due": {"status": DeliveryStatus.PENDING, "next_attempt_at": past},
        "not yet due": {"status": DeliveryStatus.PENDING, "next_attempt_at": future},
        "lease expired": {"status": DeliveryStatus.SENDING, "lease_expires_at": past},
        "leased": {"status": DeliveryStatus.SENDING, "lease_expires_at": future},
        "succeeded": {"status": DeliveryStatus.SUCCEEDED, "next_attempt_at": past},
        "dead": {"status": DeliveryStatus.DEAD_LETTERED, "next_attempt_at": past},
        "held": {"status": DeliveryStatus.HELD, "next_attempt_at": past},
        "first of its key": {
            "status": DeliveryStatus.PENDING,
            "next_attempt_at": past,
            "ordering_key": "k",
            "ordering_position": past,
        },
    }
    ids: dict[str, int] = {}
    for name, fields in rows.items():
        event = Event.objects.create(
            type="order.created", data={}, occurred_at=now, fanned_out_at=now
        )
        ids[name] = Delivery.objects.create(event=event, endpoint=endpoint, attempts=1, **fields).pk
    rule = jobs.claimable(
        waiting=[DeliveryStatus.PENDING], busy=DeliveryStatus.SENDING, now=timezone.now()
    )
    by_rule = set(Delivery.objects.filter(rule).values_list("pk", flat=True))

    claim = services.deliveries_claim(delivery_ids=list(ids.values()))

    claimed = {delivery.pk for delivery in claim.deliveries}
    assert claimed == by_rule == {ids["due"], ids["lease expired"], ids["first of its key"]}
    for delivery in Delivery.objects.filter(pk__in=claimed):
        assert delivery.status == DeliveryStatus.SENDING
        assert delivery.lease_token == claim.token
        assert delivery.attempts == 2
        assert delivery.lease_expires_at == claim.lease_expires_at
    untouched = Delivery.objects.exclude(pk__in=claimed)
    assert set(untouched.values_list("attempts", flat=True)) == {1}
    assert not untouched.filter(lease_token=claim.token).exists()


def test_a_second_claim_of_the_same_rows_takes_nothing() -> None:
    endpoint, _ = services.endpoint_create(url="http://127.0.0.1:9/hook", event_types=["*"])
    event = services.emit("order.created", {"n": 1})
    delivery = Delivery.objects.get(event=event, endpoint=endpoint)

    first = services.deliveries_claim(delivery_ids=[delivery.pk])
    second = services.deliveries_claim(delivery_ids=[delivery.pk])

    assert [d.pk for d in first.deliveries] == [delivery.pk]
    assert second.deliveries == []


def test_the_busy_check_of_a_missing_row_lets_the_message_go_on() -> None:
    assert deliveries_busy_wait(delivery_ids=[123456789]) == 0.0
