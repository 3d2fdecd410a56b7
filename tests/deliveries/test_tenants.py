"""Tenants end to end: validation, fan-out tenant to tenant on the real worker, the API's
`tenant` fields and filters, bind_model, replays, the admin lists and /metrics."""

import json
from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.test import Client
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from deliveries import services
from deliveries.bindings import bind_model
from deliveries.endpoints.suspension import endpoint_suspend_automatically
from deliveries.models import Delivery, DeliveryStatus, Endpoint, Event, Replay
from tests.conftest import wait_until
from tests.deliveries.admin.helpers import endpoint_form, hours_ago
from tests.fixtures import FAST_POLICY, new_endpoint
from tests.observability.helpers import METRICS_TOKEN, scrape, value
from tests.receiver import Receiver
from webhooks_core import tenants

pytestmark = pytest.mark.django_db(transaction=True)


def post_json(client: APIClient, path: str, payload: Any) -> Any:
    return client.post(path, data=json.dumps(payload), content_type="application/json")


def endpoint(receiver: Receiver, tenant: str | None, path: str = "", **fields: Any) -> Endpoint:
    return new_endpoint(receiver.url + path, tenant=tenant, **{**FAST_POLICY, **fields})


def event_at(created_at: datetime, tenant: str | None) -> Event:
    """An event of a tenant recorded at a given time, already fanned out."""
    event = Event.objects.create(
        type="invoice.paid",
        data={},
        occurred_at=created_at,
        fanned_out_at=created_at,
        tenant=tenant,
    )
    Event.objects.filter(pk=event.pk).update(created_at=created_at)
    return event


# --- the id itself (pure) ------------------------------------------------------------------


@pytest.mark.parametrize("good", ["acme", "a", "x" * 100, "org_1.eu-west:42", "A-Z.0_9:-"])
def test_valid_tenant_ids(good: str) -> None:
    assert tenants.problem(good) is None


@pytest.mark.parametrize(
    "bad", ["", "x" * 101, "acme corp", "acme/1", "é", "a\n", "a\x00", 7, ["acme"]]
)
def test_invalid_tenant_ids(bad: Any) -> None:
    assert tenants.problem(bad)


def test_emit_refuses_a_bad_tenant_and_writes_nothing() -> None:
    with pytest.raises(services.EventRefused) as raised:
        services.emit("invoice.paid", {}, tenant="no spaces")
    assert raised.value.field == "tenant"
    assert not Event.objects.exists()


def test_endpoint_create_refuses_a_bad_tenant_and_writes_nothing() -> None:
    with pytest.raises(services.EndpointInvalid) as raised:
        services.endpoint_create(url="http://127.0.0.1:9/", event_types=["*"], tenant="a/b")
    assert list(raised.value.errors) == ["tenant"]
    assert not Endpoint.objects.exists()


# --- fan-out on the real stack -------------------------------------------------------------


def test_events_reach_their_own_tenants_endpoints_only(
    celery_worker: object, receiver: Receiver
) -> None:
    acme = endpoint(receiver, "acme", "/acme")
    globex = endpoint(receiver, "globex", "/globex")
    untenanted = endpoint(receiver, None, "/none")

    with transaction.atomic():
        for_acme = services.emit("invoice.paid", {"n": 1}, tenant="acme")
        for_globex = services.emit("invoice.paid", {"n": 2}, tenant="globex")
        for_nobody = services.emit("invoice.paid", {"n": 3})
        for_unknown = services.emit("invoice.paid", {"n": 4}, tenant="initech")

    requests = receiver.wait_for(3)
    by_path = {r.path.removeprefix("/hook"): r.headers["X-Webhook-Id"] for r in requests}
    assert by_path == {
        "/acme": str(for_acme.pk),
        "/globex": str(for_globex.pk),
        "/none": str(for_nobody.pk),
    }
    wait_until(
        lambda: Event.objects.filter(pk=for_unknown.pk, fanned_out_at__isnull=False).exists(),
        what="fan-out of the unknown tenant's event",
    )
    assert not Delivery.objects.filter(event=for_unknown).exists()
    assert set(Delivery.objects.values_list("event_id", "endpoint_id")) == {
        (for_acme.pk, acme.pk),
        (for_globex.pk, globex.pk),
        (for_nobody.pk, untenanted.pk),
    }


def test_test_events_and_suspension_news_stay_inside_the_tenant(
    celery_worker: object, receiver: Receiver
) -> None:
    acme = endpoint(receiver, "acme", "/acme")
    acme_peer = endpoint(receiver, "acme", "/acme-peer")
    endpoint(receiver, "globex", "/globex")
    endpoint(receiver, None, "/none")

    delivery = services.endpoint_send_test_event(endpoint_id=acme.pk)
    assert delivery.event.tenant == "acme"
    [test_request] = receiver.wait_for(1)
    assert test_request.path == "/hook/acme"
    endpoint_suspend_automatically(endpoint_id=acme.pk, reason="410 Gone")

    requests = receiver.wait_for(2)
    assert requests[1].path == "/hook/acme-peer"
    news = Event.objects.get(type="endpoint.suspended")
    assert news.tenant == "acme"
    wait_until(lambda: Event.objects.filter(pk=news.pk, fanned_out_at__isnull=False).exists())
    assert list(Delivery.objects.filter(event=news).values_list("endpoint_id", flat=True)) == [
        acme_peer.pk
    ]


def test_bind_model_names_the_tenant_of_each_instance(
    celery_worker: object, receiver: Receiver
) -> None:
    endpoint(receiver, "acme", "/acme")
    endpoint(receiver, "globex", "/globex")
    bind_model(
        Group,
        created="t.x",
        serializer=lambda group: {"name": group.name},
        tenant=lambda group: group.name.split("-")[0],
    )
    try:
        with transaction.atomic():
            Group.objects.create(name="globex-admins")
        [request] = receiver.wait_for(1)
        assert request.path == "/hook/globex"
        assert Event.objects.get(type="t.x").tenant == "globex"
    finally:
        uid = f"deliveries.bindings:{Group._meta.label}"
        post_save.disconnect(sender=Group, dispatch_uid=uid)
        post_delete.disconnect(sender=Group, dispatch_uid=uid)


# --- replays ---------------------------------------------------------------------------


def test_replays_never_cross_tenants_and_filter_by_tenant(receiver: Receiver) -> None:
    acme = endpoint(receiver, "acme")
    globex = endpoint(receiver, "globex")
    untenanted = endpoint(receiver, None)
    past = {tenant: event_at(hours_ago(1), tenant) for tenant in ("acme", "globex", None)}
    everything = services.ReplayFilters(since=hours_ago(2), until=hours_ago(0))
    # Each event once, to its own tenant's endpoint: 3, not 3 x 3.
    assert services.replay_preview(filters=everything).deliveries == 3

    only_acme = services.ReplayFilters(since=hours_ago(2), until=hours_ago(0), tenant="acme")
    assert services.replay_preview(filters=only_acme).deliveries == 1
    replay, _ = services.replay_create(filters=only_acme, requested_via="test", start_task=False)
    services.replay_run_inline(replay_id=replay.pk)
    assert Replay.objects.get().tenant == "acme"
    assert list(Delivery.objects.filter(is_replay=True).values_list("event_id", "endpoint_id")) == [
        (past["acme"].pk, acme.pk)
    ]

    replay, _ = services.replay_create(filters=everything, requested_via="test", start_task=False)
    services.replay_run_inline(replay_id=replay.pk)
    assert set(Delivery.objects.filter(replay=replay).values_list("event_id", "endpoint_id")) == {
        (past["acme"].pk, acme.pk),
        (past["globex"].pk, globex.pk),
        (past[None].pk, untenanted.pk),
    }

    # Another tenant's endpoint is unknown to a tenant's replay.
    with pytest.raises(services.ReplayInvalid) as raised:
        services.replay_preview(
            filters=services.ReplayFilters(
                since=hours_ago(2), until=hours_ago(0), tenant="acme", endpoint_ids=[globex.pk]
            )
        )
    assert raised.value.field == "endpoint_ids"


# --- the API ---------------------------------------------------------------------------


def test_api_tenant_fields_and_filters(api: APIClient, receiver: Receiver) -> None:
    created = post_json(
        api, "/api/v1/endpoints", {"url": receiver.url, "event_types": ["*"], "tenant": "acme"}
    )
    assert created.status_code == 201, created.content
    assert created.json()["tenant"] == "acme"
    post_json(api, "/api/v1/endpoints", {"url": receiver.url + "/x", "event_types": ["*"]})

    listed = api.get("/api/v1/endpoints?tenant=acme").json()["results"]
    assert [e["tenant"] for e in listed] == ["acme"]
    assert len(api.get("/api/v1/endpoints").json()["results"]) == 2

    bad = post_json(
        api, "/api/v1/endpoints", {"url": receiver.url, "event_types": ["*"], "tenant": "a b"}
    )
    assert bad.status_code == 400
    assert "tenant" in bad.json()
    assert api.get("/api/v1/endpoints?tenant=a%20b").status_code == 400

    moved = api.patch(
        f"/api/v1/endpoints/{created.json()['id']}",
        data=json.dumps({"tenant": "globex"}),
        content_type="application/json",
    )
    assert moved.status_code == 400
    assert "tenant" in moved.json()
    assert Endpoint.objects.get(pk=created.json()["id"]).tenant == "acme"

    accepted = post_json(
        api, "/api/v1/events", {"type": "invoice.paid", "data": {}, "tenant": "acme"}
    )
    assert accepted.status_code == 202, accepted.content
    post_json(api, "/api/v1/events", {"type": "invoice.paid", "data": {}})
    events = api.get("/api/v1/events?tenant=acme").json()["results"]
    assert [(e["id"], e["tenant"]) for e in events] == [(accepted.json()["id"], "acme")]
    bad_event = post_json(api, "/api/v1/events", {"type": "invoice.paid", "data": {}, "tenant": ""})
    assert bad_event.status_code == 400
    assert "tenant" in bad_event.json()

    services.events_fan_out(event_ids=list(Event.objects.values_list("pk", flat=True)))
    deliveries = api.get("/api/v1/deliveries?tenant=acme").json()["results"]
    assert [d["event_id"] for d in deliveries] == [accepted.json()["id"]]
    assert len(api.get("/api/v1/deliveries").json()["results"]) == 2

    preview = post_json(
        api,
        "/api/v1/replays",
        {
            "since": hours_ago(1).isoformat(),
            "until": hours_ago(-1).isoformat(),
            "tenant": "acme",
            "dry_run": True,
        },
    )
    assert preview.status_code == 200, preview.content
    assert preview.json()["deliveries"] == 1
    started = post_json(
        api,
        "/api/v1/replays",
        {"since": hours_ago(1).isoformat(), "until": hours_ago(-1).isoformat(), "tenant": "acme"},
    )
    assert started.status_code == 202
    assert started.json()["tenant"] == "acme"


# --- admin and metrics -----------------------------------------------------------------


def test_admin_lists_filter_by_tenant(receiver: Receiver, client: Client) -> None:
    User.objects.create_superuser("op", "op@example.com", "pw")
    client.login(username="op", password="pw")
    endpoint(receiver, "acme", "/acme-hook")
    endpoint(receiver, None, "/plain-hook")
    acme_event = services.emit("invoice.paid", {}, tenant="acme")
    plain_event = services.emit("invoice.voided", {})
    services.events_fan_out(event_ids=list(Event.objects.values_list("pk", flat=True)))
    Delivery.objects.update(status=DeliveryStatus.DEAD_LETTERED)

    page = client.get("/admin/deliveries/endpoint/?tenant=acme").content.decode()
    assert "/acme-hook" in page
    assert "/plain-hook" not in page
    page = client.get("/admin/deliveries/endpoint/?tenant=-").content.decode()
    assert "/plain-hook" in page
    assert "/acme-hook" not in page
    page = client.get("/admin/deliveries/event/?tenant=acme").content.decode()
    assert str(acme_event.pk) in page
    assert str(plain_event.pk) not in page
    acme_delivery = Delivery.objects.get(event=acme_event).pk
    plain_delivery = Delivery.objects.get(event=plain_event).pk
    for list_page in ("delivery", "deadletter"):
        page = client.get(f"/admin/deliveries/{list_page}/?tenant=acme").content.decode()
        assert f"/{list_page}/{acme_delivery}/change/" in page, list_page
        assert f"/{list_page}/{plain_delivery}/change/" not in page, list_page


def test_metrics_filter_by_tenant(receiver: Receiver, client: Client, settings: Settings) -> None:
    settings.METRICS_TOKEN = METRICS_TOKEN
    settings.METRICS_ALLOWED_IPS = []
    endpoint(receiver, "acme")
    endpoint(receiver, None)
    services.emit("invoice.paid", {}, tenant="acme")
    services.emit("invoice.paid", {})
    services.emit("invoice.voided", {})
    services.events_fan_out(event_ids=list(Event.objects.values_list("pk", flat=True)))
    Delivery.objects.update(status=DeliveryStatus.DEAD_LETTERED)

    everything = scrape(client)
    assert value(everything, "webhooks_dead_letter_size") == 3
    response = client.get("/metrics?tenant=acme", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
    assert response.status_code == 200
    text = response.content.decode()
    assert "webhooks_dead_letter_size 1.0" in text
    assert 'webhooks_endpoints{state="active"} 1.0' in text
    # Only that tenant's gauges: no counters, queues or inbox.
    assert "receivers_inbox_events" not in text
    assert "webhooks_attempts_total" not in text
    bad = client.get("/metrics?tenant=a%20b", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
    assert bad.status_code == 400


def test_the_admin_sets_a_tenant_on_add_only(receiver: Receiver, client: Client) -> None:
    User.objects.create_superuser("op", "op@example.com", "pw")
    client.login(username="op", password="pw")
    response = client.post(
        "/admin/deliveries/endpoint/add/", endpoint_form(url=receiver.url, tenant="acme")
    )
    assert response.status_code == 200, response.content[:300]
    endpoint = Endpoint.objects.get()
    assert endpoint.tenant == "acme"
    change = client.get(f"/admin/deliveries/endpoint/{endpoint.pk}/change/").content.decode()
    assert 'name="tenant"' not in change
    bad = client.post(
        "/admin/deliveries/endpoint/add/", endpoint_form(url=receiver.url, tenant="a b")
    )
    assert "must be 1 to 100 letters" in bad.content.decode()
    assert Endpoint.objects.count() == 1


def test_endpoint_update_refuses_another_tenant(receiver: Receiver) -> None:
    created = endpoint(receiver, "acme")
    with pytest.raises(services.EndpointInvalid) as raised:
        services.endpoint_update(endpoint=created, tenant="globex")
    assert list(raised.value.errors) == ["tenant"]
    services.endpoint_update(endpoint=created, tenant="acme", description="same tenant")
    created.refresh_from_db()
    assert (created.tenant, created.description) == ("acme", "same tenant")
