"""Tenant-scoped API tokens: a token limited to tenant T reaches T's
endpoints, events, deliveries, replays and portal only; portal sessions and revealed
secrets are audit-logged."""

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from rest_framework.test import APIClient

from deliveries import services
from deliveries.models import ApiToken, AuditEntry, Delivery, Endpoint, Event, PortalLink, Replay
from tests.fixtures import api_client

pytestmark = pytest.mark.django_db

ENDPOINT: dict[str, Any] = {
    "url": "https://receiver.example.com/hooks",
    "event_types": ["invoice.paid"],
}


@pytest.fixture
def acme() -> APIClient:
    out = StringIO()
    call_command("create_api_token", "acme-integration", "--tenant", "acme", stdout=out)
    return api_client(out.getvalue().strip())


def send(client: APIClient, method: str, path: str, payload: Any = None) -> Any:
    if payload is None:
        return getattr(client, method)(path)
    return getattr(client, method)(path, data=json.dumps(payload), content_type="application/json")


@pytest.fixture
def globex_objects() -> dict[str, Any]:
    endpoint, _ = services.endpoint_create(**ENDPOINT, tenant="globex")
    event = services.emit("invoice.paid", {"n": 1}, tenant="globex")
    delivery = Delivery.objects.filter(event=event).first() or Delivery.objects.create(
        event=event, endpoint=endpoint
    )
    now = timezone.now()
    replay = Replay.objects.create(
        requested_via="t", since=now - timedelta(hours=1), until=now, tenant="globex"
    )
    return {"endpoint": endpoint, "event": event, "delivery": delivery, "replay": replay}


def test_the_command_makes_a_scoped_token_and_refuses_a_bad_tenant() -> None:
    out = StringIO()
    call_command("create_api_token", "x", "--tenant", "acme", stdout=out, stderr=StringIO())
    assert ApiToken.objects.get(name="x").tenant == "acme"
    with pytest.raises(CommandError, match="tenant"):
        call_command("create_api_token", "y", "--tenant", "not ok!", stdout=StringIO())


def test_another_tenants_objects_are_404(acme: APIClient, globex_objects: Any) -> None:
    e, ev, d, r = (globex_objects[k] for k in ("endpoint", "event", "delivery", "replay"))
    for method, path, payload in [
        ("get", f"/api/v1/endpoints/{e.pk}", None),
        ("patch", f"/api/v1/endpoints/{e.pk}", {"description": "mine now"}),
        ("delete", f"/api/v1/endpoints/{e.pk}", None),
        ("post", f"/api/v1/endpoints/{e.pk}/rotate-secret", {}),
        ("get", f"/api/v1/events/{ev.pk}", None),
        ("get", f"/api/v1/deliveries/{d.pk}", None),
        ("post", f"/api/v1/deliveries/{d.pk}/retry", None),
        ("get", f"/api/v1/replays/{r.pk}", None),
    ]:
        assert send(acme, method, path, payload).status_code == 404, (method, path)
    assert Endpoint.objects.filter(pk=e.pk, description="").exists()
    for path in ("/api/v1/endpoints", "/api/v1/events", "/api/v1/deliveries", "/api/v1/replays"):
        listed = acme.get(path)
        assert listed.status_code == 200
        assert listed.json()["results"] == [], path


def test_the_tokens_own_tenant_is_reachable(acme: APIClient, globex_objects: Any) -> None:
    created = send(acme, "post", "/api/v1/endpoints", ENDPOINT)  # no tenant: the token's
    assert created.status_code == 201, created.content
    assert created.json()["tenant"] == "acme"
    path = f"/api/v1/endpoints/{created.json()['id']}"
    assert acme.get(path).status_code == 200
    assert send(acme, "patch", path, {"description": "ok"}).status_code == 200
    accepted = send(acme, "post", "/api/v1/events", {"type": "invoice.paid", "data": {}})
    assert accepted.status_code == 202
    assert Event.objects.get(pk=accepted.json()["id"]).tenant == "acme"
    # Its deliveries are made right after its commit, which a plain django_db test never
    # reaches: the fan-out, as the commit would run it.
    services.events_fan_out(event_ids=[accepted.json()["id"]])
    listed = acme.get("/api/v1/endpoints").json()["results"]
    assert [row["tenant"] for row in listed] == ["acme"]
    deliveries = acme.get("/api/v1/deliveries").json()["results"]
    assert deliveries, "the acme event went to the acme endpoint"
    assert {Delivery.objects.get(pk=row["id"]).endpoint.tenant for row in deliveries} == {"acme"}
    assert send(acme, "delete", path).status_code == 204


def test_a_body_or_filter_naming_another_tenant_is_403(acme: APIClient) -> None:
    now = timezone.now()
    replay = {"since": (now - timedelta(hours=1)).isoformat(), "until": now.isoformat()}
    for path, payload in [
        ("/api/v1/endpoints", {**ENDPOINT, "tenant": "globex"}),
        ("/api/v1/endpoints", {**ENDPOINT, "tenant": None}),
        ("/api/v1/events", {"type": "invoice.paid", "data": {}, "tenant": "globex"}),
        ("/api/v1/replays", {**replay, "tenant": "globex"}),
        ("/api/v1/portal-sessions", {"tenant": "globex"}),
    ]:
        response = send(acme, "post", path, payload)
        assert response.status_code == 403, (path, payload, response.content)
        assert "acme" in response.json()["detail"]
    assert not Endpoint.objects.exists()
    assert not Event.objects.exists()
    for path in ("/api/v1/endpoints?tenant=globex", "/api/v1/deliveries?tenant=globex"):
        assert acme.get(path).status_code == 403


def test_the_receiving_side_is_403_for_a_scoped_token(acme: APIClient) -> None:
    for method, path, payload in [
        ("get", "/api/v1/sources", None),
        ("post", "/api/v1/sources", {"slug": "s", "scheme": "github", "secret": "s" * 20}),
        ("get", "/api/v1/sources/1", None),
        ("delete", "/api/v1/sources/s", None),
        ("get", "/api/v1/inbox", None),
        ("get", "/api/v1/inbox/1", None),
        ("post", "/api/v1/inbox/1/retry", None),
    ]:
        assert send(acme, method, path, payload).status_code == 403, (method, path)


def test_an_unscoped_token_keeps_its_reach(api: APIClient, globex_objects: Any) -> None:
    e = globex_objects["endpoint"]
    assert api.get(f"/api/v1/endpoints/{e.pk}").status_code == 200
    assert api.get("/api/v1/sources").status_code == 200
    made = send(api, "post", "/api/v1/portal-sessions", {"tenant": "globex"})
    assert made.status_code == 201


def test_portal_sessions_are_for_the_tokens_tenant_and_audited(acme: APIClient) -> None:
    made = send(acme, "post", "/api/v1/portal-sessions", {})
    assert made.status_code == 201, made.content
    entry = AuditEntry.objects.get(action="portal_session.create")
    token = ApiToken.objects.get(name="acme-integration")
    assert entry.tenant == "acme"
    assert entry.api_token_id == token.pk
    assert "acme-integration" in entry.actor
    assert entry.at is not None
    # The link's token is nowhere in the audit row.
    link_token = made.json()["url"].rstrip("/").rsplit("/", 1)[-1].lstrip("#")
    assert link_token not in json.dumps(
        {"actor": entry.actor, "target": entry.target, "counts": entry.counts}
    )


def test_revealing_a_secret_in_the_portal_is_audited(acme: APIClient) -> None:
    from urllib.parse import urlsplit

    from django.test import Client

    endpoint, _ = services.endpoint_create(**ENDPOINT, tenant="acme")
    url = send(acme, "post", "/api/v1/portal-sessions", {}).json()["url"]
    browser = Client()
    path = urlsplit(url).path
    opened = browser.get(path)
    if opened.status_code != 302:  # a page with a button that opens it (a POST)
        opened = browser.post(path)
    assert opened.status_code == 302, opened.content[:300]
    revealed = browser.post(f"/portal/endpoints/{endpoint.pk}/secret")
    assert revealed.status_code == 200, revealed.content[:300]
    entry = AuditEntry.objects.get(action="portal.secret_reveal")
    link = PortalLink.objects.get()
    assert entry.tenant == "acme"
    assert entry.target == f"endpoint {endpoint.pk}"
    assert entry.api_token_id == ApiToken.objects.get(name="acme-integration").pk
    assert f"portal session #{link.pk}" in entry.actor
    assert entry.at is not None
