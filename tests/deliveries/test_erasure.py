"""Erasing a tenant: the API, the command, batches resumed after a
crash, an audit row with who, when and how many rows, and no personal data left."""

import json
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import redis
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.core.files.storage import storages
from django.core.management import call_command
from django.db import connection
from django.db.models.functions import Now
from django.utils import timezone
from pytest_django.fixtures import Settings

from deliveries import services
from deliveries.models import (
    ApiToken,
    Attempt,
    AuditEntry,
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointSecret,
    ErasureStatus,
    Event,
    PortalLink,
    Replay,
    TenantErasure,
    TenantSettings,
)
from deliveries.operator import erasure
from deliveries.pipeline import messages
from tests.conftest import wait_until
from tests.fixtures import api_client
from webhooks_core.runtime.tasking import QUEUE_MAINTENANCE

LARGE = {"items": [{"sku": f"sku-{i}", "label": "x" * 20} for i in range(100)]}
PERSONAL = "jane.doe@acme.example"


@pytest.fixture(autouse=True)
def offload_to_tmp(settings: Settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = str(tmp_path)
    settings.WEBHOOKS_PAYLOAD_OFFLOAD_BYTES = 1024
    return tmp_path


def make_tenant(tenant: str, events: int = 3) -> dict[str, Any]:
    endpoint, _ = services.endpoint_create(
        url=f"https://{tenant}.example.com/hooks?token=s3cr3t",
        # Matches none of the events: the test makes their deliveries itself.
        event_types=["invoice.*"],
        tenant=tenant,
        owner_email=PERSONAL if tenant == "acme" else "ops@globex.example",
    )
    made = [services.emit("order.created", {"n": n, **LARGE}, tenant=tenant) for n in range(events)]
    for event in made:
        delivery, _ = Delivery.objects.get_or_create(event=event, endpoint=endpoint)
        Delivery.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.SUCCEEDED)
        Attempt.objects.create(
            delivery=delivery, number=1, started_at=timezone.now(), duration_ms=1
        )
    now = timezone.now()
    Replay.objects.create(
        requested_via="t", since=now - timedelta(hours=1), until=now, tenant=tenant
    )
    services.portal_link_create(tenant=tenant, requested_via="test")
    ApiToken.issue(f"{tenant}-token", tenant=tenant)
    TenantSettings.objects.create(tenant=tenant, retention_days=3)
    user = get_user_model().objects.get_or_create(username="operator")[0]
    LogEntry.objects.create(
        user=user,
        content_type=ContentType.objects.get_for_model(Endpoint),
        object_id=str(endpoint.pk),
        object_repr=endpoint.url,
        action_flag=CHANGE,
        change_message=f"owner {endpoint.owner_email}",
    )
    return {"endpoint": endpoint, "events": made}


def counts_of(tenant: str) -> dict[str, int]:
    return {
        "endpoints": Endpoint.objects.filter(tenant=tenant).count(),
        "events": Event.objects.filter(tenant=tenant).count(),
        "deliveries": Delivery.objects.filter(endpoint__tenant=tenant).count(),
        "attempts": Attempt.objects.filter(delivery__endpoint__tenant=tenant).count(),
        "replays": Replay.objects.filter(tenant=tenant).count(),
        "portal_links": PortalLink.objects.filter(tenant=tenant).count(),
        "tokens": ApiToken.objects.filter(tenant=tenant).count(),
        "settings": TenantSettings.objects.filter(tenant=tenant).count(),
    }


def no_trace_of(value: str) -> None:
    """Nothing in the database names ``value`` (a tenant id, an e-mail, a URL host)."""
    tables = connection.introspection.table_names()
    with connection.cursor() as cursor:
        for table in tables:
            if not table.startswith(("deliveries_", "django_admin_log")):
                continue
            cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608  (our own table names)
            for row in cursor.fetchall():
                assert value not in json.dumps(row, default=str), (table, row)


@pytest.mark.django_db(transaction=True)
def test_delete_tenant_erases_it_through_a_worker(celery_worker: Any) -> None:
    acme = make_tenant("acme")
    make_tenant("globex")
    files = [Path(storages["default"].path(e.data_ref)) for e in acme["events"]]
    assert all(f.exists() for f in files)
    secrets = EndpointSecret.objects.filter(endpoint=acme["endpoint"]).count()
    assert secrets >= 1
    _, plain = ApiToken.issue("operator")
    api = api_client(plain)

    response = api.delete("/api/v1/tenants/acme")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body == {"erasure": body["erasure"], "status": "running"}

    def done() -> bool:
        return api.get(f"/api/v1/erasures/{body['erasure']}").json()["status"] == "done"

    wait_until(done, what="the erasure to finish")
    progress = api.get(f"/api/v1/erasures/{body['erasure']}").json()
    assert progress["tenant"] is None
    assert progress["counts"]["events"] == 3
    assert progress["counts"]["attempts"] == 3
    assert progress["counts"]["payloads"] == 3
    assert progress["counts"]["secrets"] == secrets
    assert set(counts_of("acme").values()) == {0}
    assert not any(f.exists() for f in files)
    assert counts_of("globex") == {
        "endpoints": 1,
        "events": 3,
        "deliveries": 3,
        "attempts": 3,
        "replays": 1,
        "portal_links": 1,
        "tokens": 1,
        "settings": 1,
    }
    audit = AuditEntry.objects.get(action="tenant.erased")
    assert "operator" in audit.actor
    assert audit.api_token_id == ApiToken.objects.get(name="operator").pk
    assert audit.counts["total"] >= 3 + 3 + 3 + 1 + 1 + 1 + 1
    assert audit.at is not None
    no_trace_of("acme")
    no_trace_of(PERSONAL)


@pytest.mark.django_db
def test_a_crashed_erasure_is_resumed_by_the_periodic_task() -> None:
    make_tenant("acme", events=5)
    started = services.tenant_erasure_start(tenant="acme", actor=erasure.Actor(label="command"))
    # One batch of one row, then the worker "dies".
    assert erasure.tenant_erasure_step(erasure_id=started.pk, batch_size=1) == "more"
    started.refresh_from_db()
    assert started.status == ErasureStatus.RUNNING
    assert sum(started.counts.values()) == 1
    from deliveries.tasks import beat_entries, resume_erasures

    assert beat_entries()["deliveries-resume-erasures"]["task"] == "deliveries.erasure.resume"
    assert resume_erasures() == 1
    started.refresh_from_db()
    assert started.status == ErasureStatus.DONE
    assert started.counts["events"] == 5
    assert set(counts_of("acme").values()) == {0}


@pytest.mark.django_db
def test_batches_are_bounded() -> None:
    make_tenant("acme", events=5)
    started = services.tenant_erasure_start(tenant="acme", actor=erasure.Actor(label="command"))
    before = Attempt.objects.count()
    erasure.tenant_erasure_step(erasure_id=started.pk, batch_size=2)
    assert Attempt.objects.count() == before - 2


@pytest.mark.django_db
def test_a_delivery_being_sent_waits_for_its_lease() -> None:
    acme = make_tenant("acme", events=1)
    Delivery.objects.filter(endpoint=acme["endpoint"]).update(
        status=DeliveryStatus.SENDING, lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    started = services.tenant_erasure_start(tenant="acme", actor=erasure.Actor(label="command"))
    assert erasure.tenant_erasure_run(erasure_id=started.pk) == "waiting"
    assert Delivery.objects.filter(endpoint=acme["endpoint"]).count() == 1
    Delivery.objects.filter(endpoint=acme["endpoint"]).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert erasure.tenant_erasure_run(erasure_id=started.pk) == "done"


@pytest.mark.django_db
def test_leases_are_judged_by_the_database_clock_not_the_worker_s() -> None:
    acme = make_tenant("acme", events=1)
    # Five minutes of lease left, by the database's clock.
    Delivery.objects.filter(endpoint=acme["endpoint"]).update(
        status=DeliveryStatus.SENDING, lease_expires_at=Now() + timedelta(minutes=5)
    )
    started = services.tenant_erasure_start(tenant="acme", actor=erasure.Actor(label="command"))

    # A worker whose clock runs an hour fast must leave the delivery in flight and its
    # attempts alone.
    fast = timezone.now() + timedelta(hours=1)
    with mock.patch("django.utils.timezone.now", return_value=fast):
        assert erasure.tenant_erasure_run(erasure_id=started.pk) == "waiting"
    assert Delivery.objects.filter(endpoint=acme["endpoint"]).count() == 1
    assert Attempt.objects.filter(delivery__endpoint=acme["endpoint"]).count() == 1


@pytest.mark.django_db
def test_the_run_is_dispatched_on_the_maintenance_queue(
    redis_client: redis.Redis, django_capture_on_commit_callbacks: Any
) -> None:
    from deliveries.tasks import run_erasure

    assert run_erasure.name == messages.RUN_ERASURE_TASK
    assert messages.TASK_QUEUES[messages.RUN_ERASURE_TASK] == run_erasure.queue
    redis_client.flushdb()
    with django_capture_on_commit_callbacks(execute=True):
        started = services.tenant_erasure_start(tenant="acme", actor=erasure.Actor(label="t"))
    [message] = [json.loads(raw) for raw in redis_client.lrange(QUEUE_MAINTENANCE, 0, -1)]
    redis_client.flushdb()
    assert message["headers"]["task"] == "deliveries.erasure.run"
    assert message["headers"]["argsrepr"] == f"({started.pk},)"


@pytest.mark.django_db
def test_the_command_erases_a_tenant() -> None:
    make_tenant("acme")
    make_tenant("globex")
    out = StringIO()
    call_command("erase_tenant", "acme", stdout=out)
    assert "done" in out.getvalue()
    assert set(counts_of("acme").values()) == {0}
    assert counts_of("globex")["events"] == 3
    assert TenantErasure.objects.get().status == ErasureStatus.DONE
    audit = AuditEntry.objects.get(action="tenant.erased")
    assert audit.actor == "command"


@pytest.mark.django_db
def test_only_unscoped_tokens_may_erase() -> None:
    _, scoped = ApiToken.issue("acme", tenant="acme")
    api = api_client(scoped)
    assert api.delete("/api/v1/tenants/acme").status_code == 403
    assert api.delete("/api/v1/tenants/globex").status_code == 403
    started = services.tenant_erasure_start(tenant="x", actor=erasure.Actor(label="t"))
    assert api.get(f"/api/v1/erasures/{started.pk}").status_code == 403
    assert not TenantErasure.objects.filter(tenant="acme").exists()
    _, plain = ApiToken.issue("operator")
    operator = api_client(plain)
    assert operator.delete("/api/v1/tenants/bad%20id").status_code == 404
    assert operator.get("/api/v1/erasures/999999").status_code == 404
    # A second request while one runs answers the same erasure.
    first = operator.delete("/api/v1/tenants/acme").json()
    assert operator.delete("/api/v1/tenants/acme").json() == first
