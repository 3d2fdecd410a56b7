"""/metrics on the real stack: counters after a known scenario, database and queue gauges,
access control, and counters added up across processes (multiprocess mode)."""

import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus, Endpoint, Event
from deliveries.pipeline.wake import wake_endpoints
from receivers import services as receiver_services
from receivers.models import InboxEvent, InboxStatus
from tests.conftest import wait_until
from tests.fixtures import FAST_POLICY
from tests.receiver import Receiver, Reply
from tests.receivers.helpers import ours_event, sign_ours
from webhooks_core.crypto.signing import generate_secret

from .helpers import METRICS_TOKEN, scrape, value


@pytest.fixture
def metrics_on(settings: Settings) -> None:
    settings.METRICS_TOKEN = METRICS_TOKEN
    settings.METRICS_ALLOWED_IPS = []


@pytest.mark.django_db(transaction=True)
def test_metric_values_after_a_known_scenario(
    celery_worker: object, receiver: Receiver, client: Client, metrics_on: None
) -> None:
    """3 successes, 1 dead letter (401), 2 signature failures on the receiving side."""
    receiver.handler = lambda r: Reply(status=401 if r.path.endswith("/dead") else 200)
    ok_endpoint, _ = services.endpoint_create(url=receiver.url, event_types=["ok.*"], **FAST_POLICY)
    dead_endpoint, _ = services.endpoint_create(
        url=receiver.url + "/dead", event_types=["dead.*"], **FAST_POLICY
    )
    source, _ = receiver_services.source_create(slug="metrics-src", scheme="ours")
    before = scrape(client)

    events = [services.emit("ok.created", {"n": n}) for n in range(3)]
    events.append(services.emit("dead.created", {"n": 4}))
    for _ in range(2):
        body = ours_event()
        headers = sign_ours([generate_secret()], body)  # not the source's secret
        response = client.post(
            f"/receivers/{source.slug}/",
            body,
            content_type="application/json",
            headers=headers,
        )
        assert response.status_code == 401
    wait_until(
        lambda: (
            Delivery.objects.filter(
                event__in=events,
                status__in=[DeliveryStatus.SUCCEEDED, DeliveryStatus.DEAD_LETTERED],
            ).count()
            == 4
        ),
        what="all four deliveries final",
    )

    after = scrape(client)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    ok_id, dead_id = str(ok_endpoint.pk), str(dead_endpoint.pk)
    assert value(after, "webhooks_deliveries_total", endpoint=ok_id, outcome="succeeded") == 3
    assert value(after, "webhooks_deliveries_total", endpoint=dead_id, outcome="dead_lettered") == 1
    assert value(after, "webhooks_deliveries_total", endpoint=ok_id, outcome="dead_lettered") == 0
    assert delta("webhooks_attempts_total", status_class="2xx") == 3
    assert delta("webhooks_attempts_total", status_class="4xx") == 1
    assert delta("webhooks_delivery_latency_seconds_count") == 3
    assert delta("webhooks_attempt_duration_seconds_count") == 4
    assert (
        value(after, "receivers_requests_total", source="metrics-src", outcome="signature_failed")
        == 2
    )
    # Gauges computed from the database at scrape time.
    assert value(after, "webhooks_dead_letter_size") == 1
    assert value(after, "webhooks_deliveries", status="succeeded") == 3
    assert value(after, "webhooks_deliveries", status="pending") == 0
    assert value(after, "webhooks_oldest_pending_delivery_age_seconds") == 0
    assert value(after, "webhooks_endpoints", state="active") == 2
    assert value(after, "webhooks_suspended_endpoints") == 0
    assert value(after, "webhooks_queue_length", queue="webhooks.delivery") == 0


@pytest.mark.django_db(transaction=True)
def test_database_gauges_describe_what_waits(client: Client, metrics_on: None) -> None:
    endpoint, _ = services.endpoint_create(url="http://127.0.0.1:9/hook", event_types=["*"])
    suspended, _ = services.endpoint_create(url="http://127.0.0.1:9/other", event_types=["*"])
    services.endpoint_suspend(endpoint_id=suspended.pk, reason="test")
    event = Event.objects.create(type="t.x", occurred_at=timezone.now(), data={})
    Delivery.objects.create(event=event, endpoint=endpoint, status=DeliveryStatus.PENDING)
    Delivery.objects.filter(event=event).update(created_at=timezone.now() - timedelta(minutes=10))
    source, _ = receiver_services.source_create(slug="gauge-src", scheme="ours")
    InboxEvent.objects.create(
        source=source,
        event_id="e1",
        type="t",
        status=InboxStatus.RECEIVED,
        payload={},
        received_at=timezone.now() - timedelta(seconds=120),
    )

    samples = scrape(client)

    assert 600 <= value(samples, "webhooks_oldest_pending_delivery_age_seconds") < 900
    assert value(samples, "webhooks_suspended_endpoints") == 1
    assert value(samples, "webhooks_endpoints", state="suspended") == 1
    assert 120 <= value(samples, "receivers_oldest_unprocessed_age_seconds") < 400
    assert value(samples, "receivers_inbox_events", status="received") == 1


@pytest.mark.django_db
def test_queue_length_is_read_from_redis(
    client: Client, metrics_on: None, redis_client: redis.Redis
) -> None:
    redis_client.flushdb()
    try:
        for endpoint_id in ("e-101", "e-102", "e-103"):  # no worker: they wait in Redis
            wake_endpoints([endpoint_id])
        samples = scrape(client)
    finally:
        redis_client.flushdb()
    assert value(samples, "webhooks_queue_length", queue="webhooks.delivery") == 3
    assert value(samples, "webhooks_queue_length", queue="webhooks.fanout") == 0


@pytest.mark.django_db
def test_metrics_need_a_token_or_an_allowed_address(client: Client, settings: Settings) -> None:
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = []
    assert client.get("/metrics").status_code == 403  # not configured: closed

    settings.METRICS_TOKEN = METRICS_TOKEN
    assert client.get("/metrics").status_code == 401
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401
    assert METRICS_TOKEN not in wrong.content.decode()
    assert wrong["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}").status_code == 200
    assert client.post("/metrics").status_code == 405

    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = ["10.0.0.0/8"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.1").status_code == 401
    # A forwarded-for header written by the client proves nothing.
    spoofed = client.get("/metrics", REMOTE_ADDR="192.168.1.1", HTTP_X_FORWARDED_FOR="10.0.0.1")
    assert spoofed.status_code == 401


@pytest.mark.django_db
def test_counters_from_several_processes_are_added_up(
    client: Client, metrics_on: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Multiprocess mode: what gunicorn workers and prefork children count, /metrics sums;
    an endpoint no longer stored (erased) leaves it, though the files keep its counts."""
    endpoint, _ = services.endpoint_create(url="https://mp.example.com/hook", event_types=["*"])
    label = str(endpoint.pk)
    script = textwrap.dedent(
        f"""
        from deliveries import metrics
        for _ in range(2):
            metrics.deliveries_total.labels(endpoint="{label}", outcome="succeeded").inc()
        metrics.attempt_duration_seconds.observe(0.2)
        """
    )
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for _ in range(2):
        subprocess.run(
            [sys.executable, "-c", script],
            env=env,
            cwd=Path(__file__).resolve().parents[2],
            check=True,
            timeout=60,
        )
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))

    samples = scrape(client)

    assert value(samples, "webhooks_deliveries_total", endpoint=label, outcome="succeeded") == 4
    assert value(samples, "webhooks_attempt_duration_seconds_count") == 2
    # The database gauges are there too, computed by this process.
    assert ("webhooks_dead_letter_size", frozenset()) in samples

    Endpoint.objects.filter(pk=endpoint.pk).delete()
    assert not [key for key in scrape(client) if ("endpoint", label) in key[1]]


@pytest.mark.django_db
def test_a_bad_allow_list_entry_is_a_startup_error_not_a_500(
    client: Client, settings: Settings
) -> None:
    from webhooks_core.checks import check_metrics_access

    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = ["10.0.0.0/8", "not-an-ip"]
    assert [e.id for e in check_metrics_access(None)] == ["webhooks.E011"]
    assert client.get("/metrics", REMOTE_ADDR="10.0.0.7").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="11.0.0.7").status_code == 401


@pytest.mark.django_db
@pytest.mark.parametrize("multiprocess", [False, True], ids=["one-process", "multiprocess"])
def test_circuit_breaker_gauges_are_served_in_both_modes(
    client: Client,
    metrics_on: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    multiprocess: bool,
) -> None:
    # They once vanished when PROMETHEUS_MULTIPROC_DIR was set.
    from deliveries.models import CircuitState, Endpoint

    tripped, _ = services.endpoint_create(url="http://127.0.0.1:9/open", event_types=["*"])
    services.endpoint_create(url="http://127.0.0.1:9/closed", event_types=["*"])
    Endpoint.objects.filter(pk=tripped.pk).update(
        circuit_state=CircuitState.OPEN, circuit_changed_at=timezone.now()
    )
    if multiprocess:
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    else:
        monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)

    samples = scrape(client)

    assert value(samples, "webhooks_endpoints_by_circuit_state", state="open") == 1
    assert value(samples, "webhooks_endpoints_by_circuit_state", state="closed") == 1
    assert (
        value(samples, "webhooks_endpoint_circuit_open", endpoint=str(tripped.pk), state="open")
        == 1
    )
    assert ("webhooks_dead_letter_size", frozenset()) in samples
