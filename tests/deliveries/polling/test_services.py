"""Pull delivery's rules at the service level, on PostgreSQL: what a polling endpoint may
be, what fan-out gives it, and a consumer group's commit and seek."""

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus, Endpoint, EndpointState, Event
from deliveries.pipeline.fanout import new_delivery
from deliveries.polling import feed, positions
from deliveries.polling import services as polling
from tests.conftest import wait_until
from tests.deliveries.polling.helpers import poll_endpoint
from tests.fixtures import MESSAGE_HEADERS


@pytest.mark.django_db
def test_a_polling_endpoint_has_no_url_and_keeps_its_mode() -> None:
    with pytest.raises(services.EndpointInvalid) as caught:
        services.endpoint_create(url="http://127.0.0.1/x", event_types=["*"], mode="poll")
    assert "url" in caught.value.errors
    with pytest.raises(services.EndpointInvalid) as caught:
        services.endpoint_create(url="", event_types=["*"])
    assert "url" in caught.value.errors  # a push endpoint needs one
    endpoint = poll_endpoint()
    assert str(endpoint) == f"polling endpoint {endpoint.pk}"
    with pytest.raises(services.EndpointInvalid):
        services.endpoint_update(endpoint=endpoint, mode="push")
    with pytest.raises(services.EndpointInvalid):
        services.endpoint_update(endpoint=endpoint, url="http://127.0.0.1/x")
    pushed, _ = services.endpoint_create(url="http://127.0.0.1/x", event_types=["*"])
    with pytest.raises(services.EndpointInvalid):
        services.endpoint_update(endpoint=pushed, mode="poll")
    updated = services.endpoint_update(endpoint=endpoint, description="laptop")
    assert (updated.mode, updated.url, updated.description) == ("poll", "", "laptop")


@pytest.mark.django_db
def test_a_polling_endpoints_deliveries_are_available_whatever_its_state() -> None:
    endpoint = poll_endpoint()
    for state in (EndpointState.ACTIVE, EndpointState.SUSPENDED):
        endpoint.state = state
        delivery = new_delivery(event_id=None, endpoint=endpoint, now=timezone.now())
        assert delivery.status == DeliveryStatus.AVAILABLE


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("inline_fan_out")
def test_fan_out_gives_a_polling_endpoint_what_its_filters_match() -> None:
    endpoint = poll_endpoint()
    services.emit("invoice.paid", {"invoice": "in_1", "amount": 1})
    services.emit("invoice.voided", {"invoice": "in_1"})
    wait_until(lambda: Delivery.objects.filter(endpoint=endpoint).exists(), what="fan-out")
    rows = Delivery.objects.filter(endpoint=endpoint)
    assert [(d.event.type, d.status) for d in rows] == [("invoice.paid", "available")]


def _events(endpoint: Endpoint, count: int) -> None:
    for n in range(count):
        event = Event.objects.create(
            type="invoice.paid", occurred_at=timezone.now(), data={"invoice": f"in_{n}"}
        )
        Delivery.objects.create(event=event, endpoint=endpoint, status=DeliveryStatus.AVAILABLE)
    wait_until(
        lambda: len(feed.rows_after(endpoint.pk, positions.START, 250)) >= count,
        what="the rows in the feed",
    )


@pytest.mark.django_db(transaction=True)
def test_a_groups_committed_position_never_moves_backwards_but_by_seek() -> None:
    endpoint = poll_endpoint()
    _events(endpoint, 6)
    first = polling.group_read(endpoint=endpoint, name="g", limit=2)
    second = polling.group_read(endpoint=endpoint, name="g", limit=2)
    third = polling.group_read(endpoint=endpoint, name="g", limit=2)
    assert [len(p.data) for p in (first, second, third)] == [2, 2, 2]
    assert polling.group_read(endpoint=endpoint, name="g", limit=2).data == []  # all leased

    start = polling.consumers_with_lag(endpoint_id=endpoint.pk)[0]
    assert (start.lag, start.leased) == (6, 6)
    # The second lease committed first: the first still holds, nothing moves.
    polling.group_commit(endpoint=endpoint, name="g", iterator=second.iterator)
    assert polling.consumers_with_lag(endpoint_id=endpoint.pk)[0].lag == 6
    moved = polling.group_commit(endpoint=endpoint, name="g", iterator=first.iterator)
    assert moved == polling.group_commit(endpoint=endpoint, name="g", iterator=first.iterator)
    assert polling.consumers_with_lag(endpoint_id=endpoint.pk)[0].lag == 2  # over both
    # An older iterator commits nothing backwards.
    polling.group_commit(endpoint=endpoint, name="g", iterator=first.iterator)
    assert polling.consumers_with_lag(endpoint_id=endpoint.pk)[0].lag == 2

    # A seek moves it back (and drops the leases): everything comes again.
    polling.group_seek(endpoint=endpoint, name="g", after=endpoint.created_at)
    again = polling.group_read(endpoint=endpoint, name="g", limit=10)
    assert [m["id"] for m in again.data][:2] == [m["id"] for m in first.data]
    assert len(again.data) == 6


@pytest.mark.django_db
def test_poll_records_are_kept_as_long_as_attempts() -> None:
    from datetime import timedelta

    from deliveries.models import PollRecord
    from deliveries.pipeline.purge import purge_expired

    endpoint = poll_endpoint()
    old, recent = (
        PollRecord.objects.create(endpoint=endpoint, count=1, iterator="", next_iterator="")
        for _ in range(2)
    )
    PollRecord.objects.filter(pk=old.pk).update(at=timezone.now() - timedelta(days=400))
    purge_expired()
    assert list(PollRecord.objects.values_list("pk", flat=True)) == [recent.pk]


@pytest.mark.django_db(transaction=True)
def test_polls_messages_and_lag_are_measured() -> None:
    from deliveries.polling import records

    endpoint = poll_endpoint()
    _events(endpoint, 3)
    label = str(endpoint.pk)
    before = records.poll_messages_total.labels(label)._value.get()
    page = polling.group_read(endpoint=endpoint, name="audit", limit=2)
    assert records.poll_messages_total.labels(label)._value.get() == before + 2
    assert records.polls_total.labels(label, "messages")._value.get() >= 1

    def lag() -> dict[tuple[str, ...], float]:
        (family,) = list(records.LagCollector().collect())
        return {tuple(s.labels.values()): s.value for s in family.samples}

    assert lag()[(label, "audit")] == 3
    polling.group_commit(endpoint=endpoint, name="audit", iterator=page.iterator)
    assert lag()[(label, "audit")] == 1


@pytest.mark.django_db(transaction=True)
def test_a_message_carries_what_names_and_signs_it_never_the_endpoints_own_headers() -> None:
    # A push endpoint with a catch-up key reads its feed: its custom headers are
    # credentials for its server, and the event's trace belongs to the push's request.
    endpoint, secret = services.endpoint_create(
        url="http://127.0.0.1/x",
        event_types=["*"],
        custom_headers={"Authorization": "Bearer for-the-server", "X-Tenant": "acme"},
    )
    event = Event.objects.create(
        type="invoice.paid",
        occurred_at=timezone.now(),
        data={"invoice": "in_1"},
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )
    Delivery.objects.create(event=event, endpoint=endpoint, status=DeliveryStatus.AVAILABLE)
    wait_until(lambda: feed.rows_after(endpoint.pk, positions.START, 10), what="the row")
    [message] = feed.messages(endpoint, feed.rows_after(endpoint.pk, positions.START, 10))
    assert set(message["headers"]) == MESSAGE_HEADERS
    assert Webhook(secret).verify(message["body"], message["headers"])["data"] == {
        "invoice": "in_1"
    }
