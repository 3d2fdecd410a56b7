"""Product integration on the real stack: signal bindings, the catalogue, versions, ordered
delivery and our own signals (PostgreSQL, Redis, a Celery worker, an HTTP receiver)."""

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.dispatch import Signal
from django.test import Client
from rest_framework.test import APIClient

from deliveries import services, signals
from deliveries.bindings import bind_signal
from deliveries.models import Delivery, DeliveryStatus, Event
from deliveries.pipeline import payloads
from examples.demo_shop import services as shop
from examples.demo_shop.models import Order
from examples.demo_shop.webhook_events import ORDER_EXAMPLE
from tests.conftest import wait_until
from tests.deliveries.helpers import verify_v1_independently
from tests.fixtures import make_endpoint
from tests.helpers import replay_one
from tests.receiver import ReceivedRequest, Receiver, Reply

pytestmark = pytest.mark.django_db(transaction=True)


def in_a_failing_transaction(change: Any) -> None:
    with transaction.atomic():
        change()
        raise RuntimeError("the product's transaction fails")


def event_types_of(requests: list[ReceivedRequest]) -> list[str]:
    return [r.headers["X-Webhook-Event"] for r in requests]


def post_json(client: APIClient, path: str, payload: Any) -> Any:
    return client.post(path, data=json.dumps(payload), content_type="application/json")


# --- Django signal bindings -------------------------------------------------------------


def test_post_save_emits_in_the_same_transaction(celery_worker: object, receiver: Receiver) -> None:
    make_endpoint(receiver, event_types=["shop.order.*"])

    with transaction.atomic():
        order = Order.objects.create(customer_email="ada@example.com", amount_cents=1250)
        # Written in this transaction, next to the order ...
        [event] = Event.objects.filter(type="shop.order.created")
        assert payloads.load(event)["order_id"] == order.pk
        assert event.ordering_key == f"demo_shop.order:{order.pk}"
        time.sleep(0.5)
        # ... and sent only once it commits.
        assert receiver.requests == []

    [request] = receiver.wait_for(1)
    body = json.loads(request.body)
    assert body["type"] == "shop.order.created"
    assert body["data"] == {
        "order_id": order.pk,
        "status": "placed",
        "customer": {"email": "ada@example.com"},
        "total": {"amount_cents": 1250, "currency": "EUR"},
    }

    shop.order_ship(order_id=order.pk)
    shop.order_cancel(order_id=order.pk)
    receiver.wait_for(3)
    wait_until(
        lambda: Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count() == 3,
        what="three deliveries succeeded",
    )
    assert sorted(event_types_of(receiver.requests)) == sorted(
        ["shop.order.created", "shop.order.updated", "shop.order.deleted"]
    )
    deleted = next(r for r in receiver.requests if r.headers["X-Webhook-Event"].endswith("deleted"))
    assert json.loads(deleted.body)["data"]["order_id"] == order.pk
    assert json.loads(deleted.body)["data"]["status"] == "shipped"  # as it was


def test_rolled_back_save_emits_nothing(celery_worker: object, receiver: Receiver) -> None:
    make_endpoint(receiver, event_types=["shop.*"])

    with pytest.raises(RuntimeError):
        in_a_failing_transaction(
            lambda: Order.objects.create(customer_email="rolled@example.com", amount_cents=1)
        )
    # A committed change afterwards proves the pipeline was live while we waited.
    kept = shop.order_place(customer_email="kept@example.com", amount_cents=2)

    [request] = receiver.wait_for(1)
    time.sleep(0.5)
    assert len(receiver.requests) == 1
    assert json.loads(request.body)["data"]["order_id"] == kept.pk
    assert not Order.objects.filter(customer_email="rolled@example.com").exists()
    assert Event.objects.count() == 1


def test_a_refused_event_rolls_the_save_back(celery_worker: object) -> None:
    with pytest.raises(services.EventRefused) as refused, transaction.atomic():
        Order.objects.create(customer_email="not-an-email", amount_cents=1)

    assert refused.value.field == "data.customer.email"
    assert not Order.objects.exists()
    assert not Event.objects.exists()


def test_a_custom_signal_bound_to_an_event_type(celery_worker: object, receiver: Receiver) -> None:
    make_endpoint(receiver, event_types=["shop.invoice.paid"])
    order = shop.order_place(customer_email="ada@example.com", amount_cents=990)

    shop.invoice_pay(invoice_id=order.invoice.pk)
    shop.invoice_pay(invoice_id=order.invoice.pk)  # already paid: nothing new

    [request] = receiver.wait_for(1)
    data = json.loads(request.body)["data"]
    assert data["invoice_id"] == order.invoice.pk
    assert data["amount_cents"] == 990
    assert data["paid_at"].endswith("Z")
    assert Event.objects.get(type="shop.invoice.paid").ordering_key == (
        f"demo_shop.order:{order.pk}"
    )

    # Any signal, any sender filter: a throw-away signal bound here.
    happened = Signal()
    bind_signal(happened, "order.created", data=lambda sender, n, **_: {"n": n})
    with transaction.atomic():
        happened.send(sender=None, n=5)
    assert Event.objects.get(type="order.created").data == {"n": 5}


# --- the catalogue ----------------------------------------------------------------------


def test_undeclared_types_and_schema_violations_are_refused(api: APIClient) -> None:
    with pytest.raises(services.EventRefused) as undeclared:
        services.emit("shop.order.teleported", {"order_id": 1})
    assert undeclared.value.field == "type"
    assert "not a declared event type" in undeclared.value.message

    with pytest.raises(services.EventRefused) as violation:
        services.emit("shop.order.deleted", {**ORDER_EXAMPLE, "order_id": "one"})
    assert violation.value.field == "data.order_id"
    assert "'one' is not of type 'integer'" in violation.value.message

    with pytest.raises(services.EventRefused) as old_version:
        services.emit("shop.order.created", {"order_id": 1}, version=1)
    assert old_version.value.field == "version"

    response = post_json(api, "/api/v1/events", {"type": "nope.never", "data": {}})
    assert response.status_code == 400
    assert "not a declared event type" in json.loads(response.content)["type"][0]
    response = post_json(
        api,
        "/api/v1/events",
        {"type": "shop.invoice.paid", "data": {"invoice_id": 1, "order_id": 2}},
    )
    assert response.status_code == 400
    assert json.loads(response.content) == {
        "data.amount_cents": ["'amount_cents' is a required property"]
    }
    assert not Event.objects.exists()


def test_endpoint_filters_must_name_a_declared_type(api: APIClient) -> None:
    refused = post_json(
        api, "/api/v1/endpoints", {"url": "https://example.com/", "event_types": ["shop.orders.*"]}
    )
    assert refused.status_code == 400
    assert "matches no declared event type" in json.loads(refused.content)["event_types"][0]

    created = post_json(
        api, "/api/v1/endpoints", {"url": "https://example.com/", "event_types": ["shop.order.*"]}
    )
    assert created.status_code == 201
    # Subscribing pins the newest version of every matched type.
    assert json.loads(created.content)["version_pins"] == {
        "shop.order.created": 2,
        "shop.order.deleted": 1,
        "shop.order.updated": 1,
    }
    # Widening the filters pins the newly matched types; existing pins stay.
    endpoint_id = json.loads(created.content)["id"]
    pinned = api.patch(
        f"/api/v1/endpoints/{endpoint_id}",
        data=json.dumps({"event_types": ["shop.*"], "version_pins": {"shop.order.created": 1}}),
        content_type="application/json",
    )
    assert pinned.status_code == 200, pinned.content
    assert json.loads(pinned.content)["version_pins"] == {
        "shop.order.created": 1,
        "shop.invoice.paid": 1,
        "shop.order.deleted": 1,
        "shop.order.updated": 1,
    }
    bad_pin = post_json(
        api,
        "/api/v1/endpoints",
        {
            "url": "https://example.com/",
            "event_types": ["*"],
            "version_pins": {"shop.order.created": 3},
        },
    )
    assert bad_pin.status_code == 400
    assert "version_pins" in json.loads(bad_pin.content)


def test_catalogue_is_published_over_the_api_and_in_the_admin(api: APIClient) -> None:
    response = api.get("/api/v1/event-types")
    assert response.status_code == 200
    types = {t["name"]: t for t in json.loads(response.content)["results"]}
    created = types["shop.order.created"]
    assert created["newest_version"] == 2
    assert [v["version"] for v in created["versions"]] == [1, 2]
    assert created["versions"][1]["schema"]["required"] == [
        "order_id",
        "status",
        "customer",
        "total",
    ]
    assert created["versions"][0]["example"]["total"] == "12.50 EUR"
    assert APIClient().get("/api/v1/event-types").status_code in (401, 403)

    admin = Client()
    assert admin.get("/admin/event-types/").status_code == 302  # to the login page
    admin.force_login(get_user_model().objects.create_superuser("op", "", "pw"))
    page = admin.get("/admin/event-types/")
    assert page.status_code == 200
    assert b"shop.order.created" in page.content
    assert b"12.50 EUR" in page.content


# --- versions ---------------------------------------------------------------------------


def test_a_pinned_older_version_for_one_endpoint_the_newest_for_another(
    celery_worker: object, receiver: Receiver
) -> None:
    legacy, legacy_secret = make_endpoint(
        receiver, event_types=["shop.order.created"], version_pins={"shop.order.created": 1}
    )
    legacy.url = receiver.url + "/legacy"
    legacy.save()
    current, current_secret = make_endpoint(receiver, event_types=["shop.order.created"])
    current.url = receiver.url + "/current"
    current.save()
    assert current.version_pins == {"shop.order.created": 2}

    order = shop.order_place(customer_email="ada@example.com", amount_cents=1250)

    receiver.wait_for(2)
    by_path = {r.path: r for r in receiver.requests}
    old = json.loads(by_path["/hook/legacy"].body)
    new = json.loads(by_path["/hook/current"].body)
    assert old["id"] == new["id"]
    assert (old["version"], old["data"]) == (
        1,
        {"order_id": order.pk, "email": "ada@example.com", "total": "12.50 EUR"},
    )
    assert new["version"] == 2
    assert new["data"]["total"] == {"amount_cents": 1250, "currency": "EUR"}
    # Each endpoint's signature covers the body it got.
    assert verify_v1_independently(
        legacy_secret, by_path["/hook/legacy"].headers, by_path["/hook/legacy"].body
    )
    assert verify_v1_independently(
        current_secret, by_path["/hook/current"].headers, by_path["/hook/current"].body
    )

    # A later replay sends the same meaning again: the stored event never changes.
    delivery = Delivery.objects.get(endpoint=legacy)
    wait_until(lambda: Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.SUCCEEDED)
    replay_one(delivery.event, legacy.pk)
    receiver.wait_for(3)
    assert receiver.requests[2].body == by_path["/hook/legacy"].body


# --- ordered delivery -------------------------------------------------------------------


def test_ordered_delivery_holds_a_key_while_its_earlier_event_retries(
    celery_worker: object, receiver: Receiver
) -> None:
    make_endpoint(
        receiver,
        ordered_delivery=True,
        event_types=["order.created"],
        backoff_base_seconds=0.4,
        backoff_max_seconds=0.4,
    )
    failures_left = {"a1": 3}

    def answer(request: ReceivedRequest) -> Reply:
        name = json.loads(request.body)["data"]["name"]
        if failures_left.get(name, 0) > 0:
            failures_left[name] -= 1
            return Reply(status=503)
        return Reply(status=200)

    receiver.handler = answer
    with transaction.atomic():
        for name, key in [("a1", "A"), ("a2", "A"), ("b1", "B"), ("a3", "A"), ("b2", "B")]:
            services.emit("order.created", {"name": name}, ordering_key=key)

    receiver.wait_for(8, timeout=30)  # a1 x4, a2, a3, b1, b2
    wait_until(
        lambda: Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count() == 5,
        timeout=30,
        what="all five delivered",
    )
    names = [json.loads(r.body)["data"]["name"] for r in receiver.requests]
    assert names.count("a1") == 4
    assert names.count("a2") == names.count("a3") == names.count("b1") == names.count("b2") == 1
    key_a = [n for n in names if n.startswith("a")]
    assert key_a == ["a1", "a1", "a1", "a1", "a2", "a3"]  # emit order, one at a time
    assert names.index("b1") < names.index("b2")
    # Key B did not wait for key A's retries.
    last_a1 = len(names) - 1 - names[::-1].index("a1")
    assert names.index("b2") < last_a1


@pytest.mark.parametrize("operator_action", ["retry", "cancel"])
def test_a_dead_letter_blocks_its_key_until_an_operator_acts(
    celery_worker: object, receiver: Receiver, operator_action: str
) -> None:
    make_endpoint(receiver, ordered_delivery=True, max_attempts=2, event_types=["order.created"])
    failing = {"first"}
    receiver.handler = lambda r: Reply(
        status=500 if json.loads(r.body)["data"]["name"] in failing else 200
    )

    with transaction.atomic():
        first = services.emit("order.created", {"name": "first"}, ordering_key="K")
        second = services.emit("order.created", {"name": "second"}, ordering_key="K")
        other = services.emit("order.created", {"name": "other"}, ordering_key="L")

    wait_until(
        lambda: Delivery.objects.filter(event=first, status=DeliveryStatus.DEAD_LETTERED).exists(),
        what="the first event dead-lettered",
    )
    wait_until(
        lambda: Delivery.objects.filter(event=other, status=DeliveryStatus.SUCCEEDED).exists(),
        what="another key unaffected",
    )
    time.sleep(1.0)
    # The later event of the same key waits: the receiver never sees it before the first.
    assert Delivery.objects.get(event=second).status == DeliveryStatus.PENDING
    assert "second" not in [json.loads(r.body)["data"]["name"] for r in receiver.requests]

    failing.clear()
    dead = Delivery.objects.get(event=first)
    if operator_action == "retry":
        services.delivery_retry(delivery_id=dead.pk)
    else:
        assert services.delivery_cancel(delivery_id=dead.pk)

    wait_until(
        lambda: Delivery.objects.filter(event=second, status=DeliveryStatus.SUCCEEDED).exists(),
        what="the second event delivered once the operator acted",
    )
    names = [
        json.loads(r.body)["data"]["name"]
        for r in receiver.requests
        if "other" not in r.body.decode()
    ]
    expected = (
        ["first", "first", "first", "second"]
        if operator_action == "retry"
        else [
            "first",
            "first",
            "second",
        ]
    )
    assert names == expected


# --- our signals ------------------------------------------------------------------------


@pytest.fixture
def heard() -> Iterator[list[tuple[str, Any]]]:
    calls: list[tuple[str, Any]] = []

    def listen(name: str) -> Any:
        def receiver(sender: Any, **kwargs: Any) -> None:
            calls.append((name, kwargs.get("event") or kwargs.get("delivery")))

        return receiver

    listeners = {
        signals.event_emitted: listen("event_emitted"),
        signals.delivery_succeeded: listen("delivery_succeeded"),
        signals.delivery_dead_lettered: listen("delivery_dead_lettered"),
    }
    for signal, receiver in listeners.items():
        signal.connect(receiver, weak=False)
    yield calls
    for signal, receiver in listeners.items():
        signal.disconnect(receiver)


def test_our_signals_are_sent_after_commit(
    celery_worker: object, receiver: Receiver, heard: list[tuple[str, Any]]
) -> None:
    make_endpoint(receiver, event_types=["order.created"], max_attempts=1)
    receiver.handler = lambda r: Reply(status=200 if b'"ok"' in r.body else 500)

    with pytest.raises(RuntimeError):
        in_a_failing_transaction(lambda: services.emit("order.created", {"n": "rolled back"}))
    assert heard == []

    with transaction.atomic():
        good = services.emit("order.created", {"n": "ok"})
        bad = services.emit("order.created", {"n": "fails"})
        assert heard == []

    wait_until(lambda: len(heard) == 4, what="four signals")
    by_name: dict[str, list[Any]] = {}
    for name, obj in heard:
        by_name.setdefault(name, []).append(obj)
    assert {e.id for e in by_name["event_emitted"]} == {good.id, bad.id}
    [succeeded] = by_name["delivery_succeeded"]
    assert (succeeded.event_id, succeeded.status) == (good.id, DeliveryStatus.SUCCEEDED)
    [dead] = by_name["delivery_dead_lettered"]
    assert (dead.event_id, dead.status, dead.last_status_code) == (
        bad.id,
        DeliveryStatus.DEAD_LETTERED,
        500,
    )


def test_undeclared_types_pass_when_the_catalogue_is_not_required(
    api: APIClient, settings: Any
) -> None:
    settings.WEBHOOKS_REQUIRE_DECLARED_TYPES = False

    event = services.emit("legacy.thing", {"anything": True})
    assert (event.type, event.version) == ("legacy.thing", 1)
    # Declared types are still checked.
    with pytest.raises(services.EventRefused):
        services.emit("shop.order.deleted", {"order_id": 1})
    created = post_json(
        api, "/api/v1/endpoints", {"url": "https://example.com/", "event_types": ["legacy.*"]}
    )
    assert created.status_code == 201, created.content
