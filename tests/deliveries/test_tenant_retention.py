"""Retention per tenant: ``PUT /api/v1/tenants/{tenant}/settings``
keeps that tenant's events and attempts for fewer days than the global setting; the
portal shows it."""

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from deliveries import services
from deliveries.models import ApiToken, Attempt, Delivery, DeliveryStatus, Event
from tests.fixtures import api_client

pytestmark = pytest.mark.django_db


def put(api: APIClient, tenant: str, payload: Any) -> Any:
    return api.put(
        f"/api/v1/tenants/{tenant}/settings",
        data=json.dumps(payload),
        content_type="application/json",
    )


def old_event(tenant: str, days: float) -> Event:
    endpoint, _ = services.endpoint_create(
        url=f"https://{tenant}.example.com/h", event_types=["invoice.*"], tenant=tenant
    )
    event = services.emit("invoice.paid", {}, tenant=tenant)
    when = timezone.now() - timedelta(days=days)
    Event.objects.filter(pk=event.pk).update(created_at=when, fanned_out_at=when)
    delivery, _ = Delivery.objects.update_or_create(
        event=event, endpoint=endpoint, defaults={"status": DeliveryStatus.SUCCEEDED}
    )
    Attempt.objects.create(delivery=delivery, number=1, started_at=when, duration_ms=1)
    return event


def test_a_tenants_shorter_retention_purges_its_events_and_attempts(
    api: APIClient, settings: Settings
) -> None:
    settings.WEBHOOKS_EVENT_RETENTION_DAYS = 30
    settings.WEBHOOKS_ATTEMPT_RETENTION_DAYS = 30
    response = put(api, "acme", {"retention_days": 7})
    assert response.status_code == 200, response.content
    assert response.json() == {
        "tenant": "acme",
        "retention_days": 7,
        "event_retention_days": 7,
        "attempt_retention_days": 7,
    }
    acme_old, acme_new = old_event("acme", 10), old_event("acme", 2)
    globex_old = old_event("globex", 10)
    services.purge_expired()
    assert not Event.objects.filter(pk=acme_old.pk).exists()
    assert not Attempt.objects.filter(delivery__event_id=acme_old.pk).exists()
    assert Event.objects.filter(pk=acme_new.pk).exists()
    assert Event.objects.filter(pk=globex_old.pk).exists()  # the global 30 days
    assert Attempt.objects.filter(delivery__event_id=globex_old.pk).exists()
    assert api.get("/api/v1/tenants/acme/settings").json()["retention_days"] == 7


def test_more_days_than_the_global_setting_is_refused(api: APIClient, settings: Settings) -> None:
    settings.WEBHOOKS_EVENT_RETENTION_DAYS = 30
    for bad in (31, 0, -1, "7", True):
        response = put(api, "acme", {"retention_days": bad})
        assert response.status_code == 400, bad
        assert "retention_days" in response.json()
    assert put(api, "acme", {"retention_days": 7, "retention": 3}).status_code == 400
    assert put(api, "acme", {"retention_days": None}).json()["event_retention_days"] == 30


def test_a_scoped_token_sets_its_own_tenant_only() -> None:
    acme = api_client(ApiToken.issue("acme", tenant="acme")[1])
    assert put(acme, "acme", {"retention_days": 5}).status_code == 200
    assert put(acme, "globex", {"retention_days": 5}).status_code == 403
    assert acme.get("/api/v1/tenants/globex/settings").status_code == 403


def test_the_portal_shows_the_tenants_retention(api: APIClient) -> None:
    from urllib.parse import urlsplit

    from django.test import Client

    put(api, "acme", {"retention_days": 4})
    url = api.post("/api/v1/portal-sessions", data={"tenant": "acme"}, format="json").json()["url"]
    browser = Client()
    path = urlsplit(url).path
    opened = browser.get(path)
    if opened.status_code != 302:
        opened = browser.post(path)
    page = browser.get("/portal/").content.decode()
    assert "kept for 4 days" in page
