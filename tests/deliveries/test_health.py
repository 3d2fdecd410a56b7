"""Endpoint health and isolation on the real stack: auto-suspension with its
notifications, the circuit breaker, rate and in-flight limits across workers, the SSRF
guard at creation and at connect time."""

import json
from typing import Any

import pytest
from django.core import mail
from django.db import transaction
from prometheus_client import REGISTRY
from pytest_django.fixtures import Settings as SettingsWrapper
from rest_framework.test import APIClient

from deliveries import services
from deliveries.endpoints.lifecycle import _add_secret
from deliveries.metrics import SCRAPE_TIME_REGISTRY
from deliveries.models import (
    Attempt,
    CircuitState,
    CircuitTransition,
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointState,
)
from deliveries.signals import endpoint_suspended
from tests.conftest import wait_until
from tests.deliveries.helpers import emit_and_wait_for_arrivals, max_in_any_window, succeeded_count
from tests.fixtures import make_endpoint
from tests.helpers import sweeping_in_background, worker_process
from tests.receiver import Receiver, Reply
from webhooks_core.egress import ssrf

pytestmark = pytest.mark.django_db(transaction=True)


# --- auto-suspension ---------------------------------------------------------------------


def test_endpoint_is_suspended_after_the_threshold_and_everyone_is_told(
    celery_worker: object, receiver: Receiver
) -> None:
    signalled: list[dict[str, Any]] = []

    def on_suspended(sender: object, **kwargs: Any) -> None:
        signalled.append(kwargs)

    endpoint_suspended.connect(on_suspended)
    failing, _ = make_endpoint(
        receiver,
        description="billing",
        owner_email="ops@example.com",
        max_attempts=20,
        suspend_after_failures=3,
        suspend_window_seconds=0,
    )
    receiver.default = Reply(status=500)
    try:
        with Receiver.running() as operations:
            watcher, _ = make_endpoint(operations, event_types=["endpoint.suspended"])

            event = services.emit("order.created", {"id": 1})

            wait_until(
                lambda: Endpoint.objects.get(pk=failing.pk).state == EndpointState.SUSPENDED,
                what="the failing endpoint to be suspended",
            )
            [notice] = operations.wait_for(1)
    finally:
        endpoint_suspended.disconnect(on_suspended)

    # Suspended after exactly the threshold, and no attempt is spent while suspended.
    delivery = Delivery.objects.get(event=event, endpoint=failing)
    assert delivery.status == DeliveryStatus.HELD
    assert delivery.attempts == 3
    assert len(receiver.requests) == 3
    later = services.emit("order.created", {"id": 2})
    wait_until(lambda: Delivery.objects.filter(event=later, status="held").exists())
    assert len(receiver.requests) == 3
    failing.refresh_from_db()
    assert "3 consecutive failed attempts" in failing.state_reason

    # The operational event reaches its subscriber, never the suspended endpoint itself.
    assert notice.headers["X-Webhook-Event"] == "endpoint.suspended"
    payload = json.loads(notice.body)["data"]
    assert payload["endpoint_id"] == str(failing.pk)
    assert "3 consecutive failed attempts" in payload["reason"]
    assert not Delivery.objects.filter(event__type="endpoint.suspended", endpoint=failing).exists()
    assert Delivery.objects.filter(event__type="endpoint.suspended", endpoint=watcher).exists()

    # The owner's email (locmem backend in tests) and the signal.
    wait_until(lambda: len(mail.outbox) == 1 and len(signalled) == 1, what="notifications")
    [message] = mail.outbox
    assert message.to == ["ops@example.com"]
    assert "billing" in message.subject
    assert "3 consecutive failed attempts" in message.body
    assert receiver.url not in message.body  # only the host: the path may hold a token
    assert signalled[0]["endpoint"].pk == failing.pk


def test_failures_below_the_window_do_not_suspend(
    celery_worker: object, receiver: Receiver
) -> None:
    endpoint, _ = make_endpoint(
        receiver, max_attempts=4, suspend_after_failures=2, suspend_window_seconds=3600
    )
    receiver.default = Reply(status=500)

    event = services.emit("order.created", {"id": 1})

    wait_until(lambda: Delivery.objects.filter(event=event, status="dead_lettered").exists())
    endpoint.refresh_from_db()
    assert endpoint.state == EndpointState.ACTIVE
    assert endpoint.consecutive_failures == 4
    assert endpoint.failing_since is not None


# --- circuit breaker ---------------------------------------------------------------------


@pytest.fixture
def quick_breaker(settings: SettingsWrapper) -> None:
    settings.WEBHOOKS_BREAKER_MIN_ATTEMPTS = 4
    settings.WEBHOOKS_BREAKER_ERROR_RATE = 0.5
    settings.WEBHOOKS_BREAKER_WINDOW_SECONDS = 60.0
    settings.WEBHOOKS_BREAKER_COOLDOWN_SECONDS = 2.0
    settings.WEBHOOKS_BREAKER_RAMP_SECONDS = 1.0


def transitions(endpoint: Endpoint) -> list[CircuitTransition]:
    return list(CircuitTransition.objects.filter(endpoint=endpoint).order_by("at", "id"))


def test_breaker_opens_then_one_probe_then_closes(
    celery_worker: object, receiver: Receiver, quick_breaker: None
) -> None:
    opened_before = (
        REGISTRY.get_sample_value("webhooks_circuit_transitions_total", {"to_state": "open"}) or 0.0
    )
    endpoint, _ = make_endpoint(receiver, max_attempts=50, suspend_after_failures=0)
    receiver.default = Reply(status=500)

    with transaction.atomic():
        for n in range(5):
            services.emit("order.created", {"n": n})
    wait_until(
        lambda: Endpoint.objects.get(pk=endpoint.pk).circuit_state == CircuitState.OPEN,
        what="the circuit to open",
    )
    assert (
        SCRAPE_TIME_REGISTRY.get_sample_value(
            "webhooks_endpoints_by_circuit_state", {"state": "open"}
        )
        == 1.0
    )
    receiver.default = Reply(status=200)
    # The deliveries the open circuit refused wait in the database; beat's sweeper brings
    # them back when the cool-down is over.
    with sweeping_in_background(interval=0.2):
        wait_until(lambda: succeeded_count(endpoint) == 5, timeout=30, what="every delivery")

    opened, probing, closed = transitions(endpoint)
    assert (opened.from_state, opened.to_state) == ("closed", "open")
    assert (probing.from_state, probing.to_state) == ("open", "half_open")
    assert (closed.from_state, closed.to_state) == ("half_open", "closed")
    cool_down = (probing.at - opened.at).total_seconds()
    assert cool_down >= 2.0
    # Nothing reached the receiver while open (a request already admitted when it opened
    # may land just after), and exactly one probe while half-open.
    arrivals = [r.received_at for r in receiver.requests]
    assert [t for t in arrivals if opened.at.timestamp() + 0.3 < t < probing.at.timestamp()] == []
    assert len([t for t in arrivals if probing.at.timestamp() < t < closed.at.timestamp()]) == 1
    # Waiting spent no attempts: every attempt counted is a request the receiver saw.
    assert Attempt.objects.filter(delivery__endpoint=endpoint).count() == len(arrivals)
    assert sum(d.attempts for d in Delivery.objects.filter(endpoint=endpoint)) == len(arrivals)
    assert (
        REGISTRY.get_sample_value("webhooks_circuit_transitions_total", {"to_state": "open"})
        == opened_before + 1
    )


# --- rate and in-flight limits -----------------------------------------------------------


@pytest.mark.worker  # two `celery worker` processes
def test_rate_limit_holds_across_two_worker_processes(
    transactional_db: None, receiver: Receiver, redis_client: Any
) -> None:
    redis_client.flushdb()
    endpoint, _ = make_endpoint(receiver, rate_limit_per_second=4)
    count = 20
    with transaction.atomic():
        for n in range(count):
            services.emit("order.created", {"n": n})

    worker_env = {"WEBHOOKS_DEFER_SECONDS": "0.2"}
    with worker_process(worker_env), worker_process(worker_env):
        wait_until(lambda: succeeded_count(endpoint) == count, timeout=90, what="all delivered")
    redis_client.flushdb()

    arrivals = sorted(r.received_at for r in receiver.requests)
    assert len(arrivals) == count
    # 4/s across both processes, measured at the receiver. The limiter admits at most 4 in
    # any 1 s (a moving window), so any 2 s of admissions hold at most 8. Arrivals lag their
    # admission by a varying delay under load: a 1.5 s window of arrivals fits inside 2 s of
    # admissions as long as that delay varies by under 0.5 s. Without the limit all 20
    # arrive within a second or two.
    assert max_in_any_window(arrivals, 1.5) <= 8
    assert (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) <= 4 * 1.3


def test_at_most_max_in_flight_requests_per_endpoint(
    celery_worker: object, receiver: Receiver
) -> None:
    endpoint, _ = make_endpoint(receiver, max_in_flight=2)
    receiver.default = Reply(delay_seconds=0.4)

    arrivals = emit_and_wait_for_arrivals(endpoint, receiver, 8)
    # Each request is open for 0.4 s: a third one may only start when one has ended.
    assert max_in_any_window(arrivals, 0.35) <= 2
    assert sum(d.attempts for d in Delivery.objects.filter(endpoint=endpoint)) == 8


# --- SSRF guard --------------------------------------------------------------------------


@pytest.fixture
def nothing_internal_allowed(settings: SettingsWrapper) -> None:
    settings.WEBHOOKS_ALLOWED_NETWORKS = []


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://localhost:8080/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.8/hook",
        "http://[::1]/hook",
        "http://[::ffff:192.168.0.1]/hook",
        "http://224.0.0.1/hook",
    ],
)
def test_internal_urls_are_refused_at_creation(
    api: APIClient, nothing_internal_allowed: None, url: str
) -> None:
    response = api.post(
        "/api/v1/endpoints",
        data=json.dumps({"url": url, "event_types": ["*"]}),
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "WEBHOOKS_ALLOWED_NETWORKS" in response.json()["url"][0]
    with pytest.raises(ssrf.UnsafeURL):
        services.endpoint_create(url=url, event_types=["*"])
    assert not Endpoint.objects.exists()


def test_internal_urls_are_refused_on_update(
    api: APIClient, receiver: Receiver, nothing_internal_allowed: None
) -> None:
    endpoint = Endpoint.objects.create(url="https://1.1.1.1/hook", event_types=["*"])
    response = api.patch(
        f"/api/v1/endpoints/{endpoint.pk}",
        data=json.dumps({"url": "http://169.254.169.254/"}),
        content_type="application/json",
    )
    assert response.status_code == 400
    endpoint.refresh_from_db()
    assert endpoint.url == "https://1.1.1.1/hook"


def test_http_is_refused_when_https_is_required(api: APIClient, settings: SettingsWrapper) -> None:
    settings.WEBHOOKS_REQUIRE_HTTPS = True
    response = api.post(
        "/api/v1/endpoints",
        data=json.dumps({"url": "http://1.1.1.1/hook", "event_types": ["*"]}),
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "https" in response.json()["url"][0]


def test_connect_time_refusal_for_a_name_resolving_to_loopback(
    receiver: Receiver, nothing_internal_allowed: None
) -> None:
    """A row that never went through validation (or whose DNS changed since) is still
    refused when connecting; the attempt is recorded as a retryable network error."""
    endpoint = Endpoint.objects.create(
        url=f"http://localhost:{receiver.port}/hook",
        event_types=["*"],
        backoff_base_seconds=30,
        backoff_max_seconds=60,
    )
    _add_secret(endpoint)
    event = services.emit("order.created", {"id": 1})
    services.event_fan_out(event_id=event.id)
    delivery = Delivery.objects.get(event=event)

    outcome = services.endpoint_work_for_delivery(delivery_id=delivery.pk)

    assert outcome == services.DeliveryOutcome.RETRY_SCHEDULED
    assert receiver.requests == []
    attempt = Attempt.objects.get(delivery=delivery)
    assert attempt.response_status is None
    assert "refused by the SSRF guard" in attempt.error
    assert "loopback" in attempt.error
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PENDING
    assert "SSRF" in delivery.last_error


@pytest.mark.django_db
def test_while_the_probe_runs_the_others_wait_as_long_as_a_request_can_take(
    receiver: Receiver,
) -> None:
    # Without this, every waiting delivery of a dead endpoint came back each second during
    # the probe and the churn of claims slowed the healthy endpoints down.
    from django.utils import timezone

    from deliveries.pipeline.owner.gate import endpoint_gate

    endpoint, _ = make_endpoint(receiver, connect_timeout_seconds=1.0, read_timeout_seconds=4.0)
    endpoint.circuit_state = "half_open"
    endpoint.circuit_changed_at = timezone.now()

    gate = endpoint_gate(endpoint=endpoint)

    assert gate.lanes == 0
    assert gate.hold_seconds >= 5.0


@pytest.mark.django_db
def test_an_open_circuit_holds_the_endpoint_until_its_cool_down_ends(receiver: Receiver) -> None:
    from django.utils import timezone

    from deliveries.pipeline.owner.gate import endpoint_gate

    endpoint, _ = make_endpoint(receiver)
    endpoint.circuit_state = "open"
    endpoint.circuit_changed_at = timezone.now()

    gate = endpoint_gate(endpoint=endpoint)

    cooldown = 30.0  # WEBHOOKS_BREAKER_COOLDOWN_SECONDS' default
    assert gate.lanes == 0
    assert cooldown * 0.9 <= gate.hold_seconds <= cooldown
