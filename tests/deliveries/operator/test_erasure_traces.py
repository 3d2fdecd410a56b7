"""After a tenant's erasure nothing of it is readable in any store we write: not the
admin's log (its settings, its API tokens with their key prefix), not audit actor labels
(a token's name), not an OAuth2 token kept in Redis, not its endpoints' ids at /metrics."""

from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType

from deliveries import conf, metrics, services
from deliveries.destinations.http_client import oauth2
from deliveries.models import ApiToken, TenantSettings
from deliveries.operator import erasure
from webhooks_core.models import AuditEntry
from webhooks_core.web.metrics import exposition

pytestmark = pytest.mark.django_db

TOKEN_NAME = "acme-billing-integration"


def logged(obj: Any) -> None:
    """What the admin writes when someone adds ``obj``."""
    LogEntry.objects.create(
        user=get_user_model().objects.get_or_create(username="operator")[0],
        content_type=ContentType.objects.get_for_model(type(obj)),
        object_id=str(obj.pk),
        object_repr=str(obj),
        action_flag=ADDITION,
        change_message=f"[{{'added': {{'name': '{obj}'}}}}]",
    )


def test_erasure_leaves_no_trace_outside_its_rows(django_capture_on_commit_callbacks: Any) -> None:
    token, _ = ApiToken.issue(TOKEN_NAME, tenant="acme")
    logged(token)
    settings_row = TenantSettings.objects.create(tenant="acme", retention_days=3)
    logged(settings_row)
    link, _ = services.portal_link_create(tenant="acme", api_token=token, requested_via="api")
    logged(link)
    assert AuditEntry.objects.filter(actor__contains=TOKEN_NAME).exists()
    endpoint, _ = services.endpoint_create(
        url="https://acme.example.com/hooks",
        event_types=["*"],
        tenant="acme",
        auth={
            "type": "oauth2_client_credentials",
            "token_url": "https://auth.acme.example.com/token",
            "client_id": "acme",
            "client_secret": "client-s3cret",
        },
    )
    credentials = endpoint.oauth2_credentials()
    assert credentials is not None
    store = oauth2.store_for(conf.counters().redis_url)
    key = f"{oauth2.KEY_PREFIX}{endpoint.pk}:{credentials.fingerprint}"
    store.put(key, "encrypted-token", 600)
    metrics.deliveries_total.labels(endpoint=str(endpoint.pk), outcome="succeeded").inc()
    assert str(endpoint.pk) in exposition().decode()

    started = services.tenant_erasure_start(tenant="acme", actor=erasure.Actor(label="command"))
    with django_capture_on_commit_callbacks(execute=True):
        assert erasure.tenant_erasure_run(erasure_id=started.pk) == "done"

    for entry in LogEntry.objects.all():
        assert "acme" not in f"{entry.object_repr} {entry.change_message}", entry.object_repr
    assert not AuditEntry.objects.filter(actor__contains=TOKEN_NAME).exists()
    assert AuditEntry.objects.filter(actor=f"api token #{token.pk} (erased)").exists()
    assert store.get(key) is None
    assert str(endpoint.pk) not in exposition().decode()
