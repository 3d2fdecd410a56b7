"""The console's actions on the real stack: worker on Redis, receiver on 127.0.0.1."""

import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper
from standardwebhooks.webhooks import Webhook

from deliveries import services
from deliveries.models import (
    Delivery,
    DeliveryStatus,
    EndpointState,
    Event,
    Replay,
    ReplayStatus,
)
from deliveries.operator.replay import ReplayFilters
from tests.conftest import wait_until
from tests.deliveries.admin.helpers import event_at, hours_ago
from tests.deliveries.helpers import verify_v1_independently
from tests.fixtures import make_endpoint
from tests.receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)

ADMIN = "/admin/deliveries"


@pytest.fixture
def admin_client_() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def act(client: Client, model: str, action: str, pks: list[Any], **extra: Any) -> Any:
    data = {"action": action, "_selected_action": [str(pk) for pk in pks], **extra}
    return client.post(f"{ADMIN}/{model}/", data, follow=True)


def quiet_for(receiver: Receiver, seconds: float, expected: int) -> None:
    """Nothing more than `expected` requests arrives within `seconds`."""
    time.sleep(seconds)
    assert len(receiver.requests) == expected, [
        r.headers.get("X-Webhook-Id") for r in receiver.requests
    ]


def test_replay_resends_exactly_the_matching_events_with_original_ids(
    celery_worker: object, receiver: Receiver, settings: SettingsWrapper
) -> None:
    settings.WEBHOOKS_REPLAY_BATCH_SIZE = 2  # several batches, each its own task
    chosen, secret = make_endpoint(receiver, event_types=["invoice.*", "order.*"])
    other, _ = make_endpoint(receiver, url=f"{receiver.url}?other", event_types=["*"])
    matching = [event_at("invoice.paid", hours_ago(h)) for h in (1.9, 1.5, 1.2, 1.0, 0.6)]
    event_at("order.created", hours_ago(1.1))  # wrong type
    event_at("invoice.paid", hours_ago(3))  # before the range
    event_at("invoice.paid", hours_ago(0.1))  # after it

    replay, preview = services.replay_create(
        filters=ReplayFilters(
            since=hours_ago(2),
            until=hours_ago(0.5),
            event_types=("invoice.*",),
            endpoint_ids=(chosen.pk,),
        ),
        requested_via="test",
    )
    assert preview.deliveries == 5

    requests = receiver.wait_for(5)
    wait_until(
        lambda: (
            Delivery.objects.filter(replay=replay, status=DeliveryStatus.SUCCEEDED).count() == 5
        ),
        what="replayed deliveries succeeded",
    )
    quiet_for(receiver, 1.0, 5)
    assert {r.headers["X-Webhook-Id"] for r in requests} == {str(e.pk) for e in matching}
    assert all(r.path == "/hook" for r in requests)  # never the other endpoint
    for request in requests:
        assert request.headers["X-Webhook-Replay"] == "true"
        assert verify_v1_independently(secret, request.headers, request.body)
        Webhook(secret).verify(request.body, request.headers)
    replay.refresh_from_db()
    assert replay.status == ReplayStatus.DONE
    assert (replay.events_done, replay.deliveries_created) == (5, 5)
    assert not Delivery.objects.filter(endpoint=other).exists()


def test_replay_backs_off_like_any_delivery(celery_worker: object, receiver: Receiver) -> None:
    _endpoint, _ = make_endpoint(receiver)
    event = event_at("invoice.paid", hours_ago(1))
    receiver.script(503, 503)
    services.replay_create(
        filters=ReplayFilters(since=hours_ago(2), until=hours_ago(0.5)), requested_via="test"
    )
    receiver.wait_for(3)
    wait_until(
        lambda: Delivery.objects.filter(event=event, status=DeliveryStatus.SUCCEEDED).exists(),
        what="replay succeeded after retries",
    )
    delivery = Delivery.objects.get(event=event)
    assert delivery.is_replay
    assert delivery.attempts == 3
    assert {r.headers["X-Webhook-Id"] for r in receiver.requests} == {str(event.pk)}


@pytest.mark.parametrize("backlog", ["deliver", "cancel"])
def test_resume_delivers_or_cancels_the_held_backlog_as_chosen(
    celery_worker: object, receiver: Receiver, admin_client_: Client, backlog: str
) -> None:
    endpoint, _ = make_endpoint(receiver)
    act(admin_client_, "endpoint", "suspend_endpoints", [endpoint.pk])
    events = [services.emit("invoice.paid", {"n": n}) for n in range(3)]
    wait_until(
        lambda: Delivery.objects.filter(endpoint=endpoint, status=DeliveryStatus.HELD).count() == 3,
        what="held deliveries",
    )
    assert receiver.requests == []

    act(
        admin_client_, "endpoint", "resume_endpoints", [endpoint.pk], confirm="yes", backlog=backlog
    )
    endpoint.refresh_from_db()
    assert endpoint.state == EndpointState.ACTIVE
    if backlog == "deliver":
        requests = receiver.wait_for(3)
        assert {r.headers["X-Webhook-Id"] for r in requests} == {str(e.pk) for e in events}
        wait_until(
            lambda: Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count() == 3,
            what="backlog delivered",
        )
    else:
        assert Delivery.objects.filter(status=DeliveryStatus.CANCELLED).count() == 3
        quiet_for(receiver, 1.0, 0)


def test_dlq_retry_goes_through_the_normal_sending_path(
    celery_worker: object, receiver: Receiver, admin_client_: Client
) -> None:
    _endpoint, secret = make_endpoint(receiver)
    receiver.script(401)  # dead-lettered at once
    event = services.emit("invoice.paid", {"n": 1})
    wait_until(
        lambda: Delivery.objects.filter(event=event, status=DeliveryStatus.DEAD_LETTERED).exists(),
        what="dead-lettered",
    )
    page = admin_client_.get(f"{ADMIN}/deadletter/").content.decode()
    assert "HTTP 401" in page

    delivery = Delivery.objects.get(event=event)
    act(admin_client_, "deadletter", "retry_now", [delivery.pk])
    requests = receiver.wait_for(2)
    wait_until(
        lambda: Delivery.objects.filter(event=event, status=DeliveryStatus.SUCCEEDED).exists(),
        what="retried delivery succeeded",
    )
    assert requests[1].headers["X-Webhook-Id"] == str(event.pk)
    assert requests[1].headers["X-Webhook-Replay"] == "false"
    assert verify_v1_independently(secret, requests[1].headers, requests[1].body)
    delivery.refresh_from_db()
    assert delivery.attempts == 2


def test_test_event_reaches_only_that_endpoint_and_its_result_shows(
    celery_worker: object, receiver: Receiver, admin_client_: Client
) -> None:
    target, _ = make_endpoint(receiver, event_types=["invoice.*"])
    make_endpoint(receiver, url=f"{receiver.url}?other", event_types=["*"])

    response = act(admin_client_, "endpoint", "send_test_event", [target.pk])
    assert response.redirect_chain[-1][0].endswith(f"/endpoint/{target.pk}/change/#test-events")
    [request] = receiver.wait_for(1)
    assert request.headers["X-Webhook-Event"] == "webhook.test"
    assert request.path == "/hook"
    wait_until(
        lambda: Delivery.objects.filter(
            event__type="webhook.test", status=DeliveryStatus.SUCCEEDED
        ).exists(),
        what="test event delivered",
    )
    page = admin_client_.get(f"{ADMIN}/endpoint/{target.pk}/change/").content.decode()
    assert "test-event-succeeded" in page
    assert "HTTP 200" in page
    quiet_for(receiver, 0.5, 1)
    assert Event.objects.get(type="webhook.test").deliveries.count() == 1
    assert Replay.objects.count() == 0
