"""The admin's side of tenant privacy: the token form's tenant, starting an erasure, tenant
settings and the audit log."""

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from pytest_django.fixtures import Settings

from deliveries.models import ApiToken, TenantErasure, TenantSettings
from webhooks_core.models import AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin() -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def test_the_token_form_makes_a_scoped_token(admin: Client) -> None:
    response = admin.post(
        "/admin/webhooks_core/apitoken/add/", {"name": "acme-int", "tenant": "acme"}
    )
    assert response.status_code == 200
    token = ApiToken.objects.get(name="acme-int")
    assert token.tenant == "acme"
    assert b"whk_" in response.content  # shown once, on its own page
    bad = admin.post("/admin/webhooks_core/apitoken/add/", {"name": "x", "tenant": "not ok"})
    assert bad.status_code == 200
    assert not ApiToken.objects.filter(name="x").exists()
    unscoped = admin.post("/admin/webhooks_core/apitoken/add/", {"name": "ops", "tenant": ""})
    assert unscoped.status_code == 200
    assert ApiToken.objects.get(name="ops").tenant is None


def test_an_operator_starts_an_erasure(admin: Client) -> None:
    response = admin.post("/admin/deliveries/tenanterasure/add/", {"tenant": "acme"})
    assert response.status_code == 302, response.content[:500]
    erasure = TenantErasure.objects.get()
    assert erasure.tenant == "acme"
    assert "admin user" in erasure.requested_via
    page = admin.get(f"/admin/deliveries/tenanterasure/{erasure.pk}/change/")
    assert page.status_code == 200
    entry = AuditEntry.objects.get(action="tenant.erasure_start")
    assert entry.user_id is not None
    assert admin.get("/admin/webhooks_core/auditentry/").status_code == 200


def test_tenant_settings_go_through_the_service(admin: Client, settings: Settings) -> None:
    settings.WEBHOOKS_EVENT_RETENTION_DAYS = 30
    data: dict[str, Any] = {"tenant": "acme", "retention_days": 40}
    refused = admin.post("/admin/deliveries/tenantsettings/add/", data)
    assert refused.status_code == 200
    assert not TenantSettings.objects.exists()
    accepted = admin.post("/admin/deliveries/tenantsettings/add/", {**data, "retention_days": 9})
    assert accepted.status_code == 302
    assert TenantSettings.objects.get(tenant="acme").retention_days == 9
    assert AuditEntry.objects.filter(action="tenant.settings", tenant="acme").exists()
