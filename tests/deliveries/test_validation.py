"""The CloudEvents webhook handshake end to end: real PostgreSQL, Redis, Celery worker
and a handshake-aware receiver on 127.0.0.1 (tests/receiver.py answers OPTIONS)."""

import json
from datetime import timedelta
from typing import Any

import pytest
from django.core import checks
from django.db import transaction
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from deliveries import services
from deliveries.endpoints import validation
from deliveries.models import (
    Attempt,
    Delivery,
    DeliveryStatus,
    Endpoint,
    Event,
    ValidationState,
)
from tests.conftest import wait_until
from tests.deliveries.helpers import ORIGIN, consent, ok_without_consent
from tests.fixtures import new_endpoint, operator_api
from tests.receiver import ReceivedRequest, Receiver, Reply

pytestmark = pytest.mark.django_db(transaction=True)

FAST: dict[str, Any] = {
    "backoff_base_seconds": 0.05,
    "backoff_max_seconds": 0.2,
    "connect_timeout_seconds": 1.0,
    "read_timeout_seconds": 2.0,
}


@pytest.fixture(autouse=True)
def origin(settings: SettingsWrapper) -> None:
    settings.WEBHOOKS_VALIDATION_ORIGIN = ORIGIN


def validating_endpoint(receiver: Receiver, **fields: Any) -> Endpoint:
    return new_endpoint(receiver.url, validation="cloudevents", **{**FAST, **fields})


def state_of(endpoint: Endpoint) -> str | None:
    return Endpoint.objects.get(pk=endpoint.pk).validation_state


def emit() -> Event:
    with transaction.atomic():
        return services.emit("invoice.paid", {"invoice": "in_1"})


def delivery_waits(event: Event) -> Delivery:
    """The event's delivery exists, is pending, and spent no attempt."""
    wait_until(lambda: Delivery.objects.filter(event=event).exists(), what="fan-out")
    delivery = Delivery.objects.get(event=event)
    # An owner's pass in this thread (once a worker's owner, if any, let go): it must
    # claim nothing.
    passes = []

    def owned_once() -> bool:
        passes.append(services.endpoint_work(endpoint_id=delivery.endpoint_id))
        return passes[-1].owned

    wait_until(owned_once, what="an owner's pass")
    assert sum(p.sent for p in passes) == 0
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.attempts == 0
    assert not Attempt.objects.filter(delivery=delivery).exists()
    return delivery


def test_a_consenting_target_gets_the_handshake_then_its_deliveries(
    celery_worker: object, receiver: Receiver
) -> None:
    receiver.options_handler = consent()
    endpoint = validating_endpoint(receiver, rate_limit_per_second=5)

    [options] = receiver.wait_for_options(1)
    assert options.headers["WebHook-Request-Origin"] == ORIGIN
    assert options.headers["WebHook-Request-Rate"] == "300"
    assert options.path == "/hook"
    wait_until(lambda: state_of(endpoint) == ValidationState.VALIDATED, what="validated")

    event = emit()
    [request] = receiver.wait_for(1)
    assert request.headers["X-Webhook-Id"] == str(event.id)
    # The spec: after consent, every delivery carries the origin it was given for.
    assert request.headers["WebHook-Request-Origin"] == ORIGIN
    wait_until(
        lambda: Delivery.objects.filter(event=event, status=DeliveryStatus.SUCCEEDED).exists()
    )
    data = operator_api().get(f"/api/v1/endpoints/{endpoint.pk}").json()
    assert data["validation"] == "cloudevents"
    assert data["validation_state"] == "validated"
    assert data["validation_allowed_rate"] is None


def test_a_200_without_the_header_is_no_consent_and_the_button_asks_again(
    celery_worker: object, receiver: Receiver
) -> None:
    receiver.options_handler = ok_without_consent
    endpoint = validating_endpoint(receiver)
    wait_until(lambda: state_of(endpoint) == ValidationState.REFUSED, what="refused")
    assert (
        "without WebHook-Allowed-Origin" in Endpoint.objects.get(pk=endpoint.pk).validation_reason
    )

    event = emit()
    delivery = delivery_waits(event)
    assert receiver.requests == []  # never sent to a refused endpoint

    receiver.options_handler = consent(allowed_origin="*")
    response = operator_api().post(f"/api/v1/endpoints/{endpoint.pk}/validate")
    assert response.status_code == 202, response.content
    assert response.json()["validation_state"] == "pending"

    [request] = receiver.wait_for(1)
    assert json.loads(request.body)["id"] == str(event.id)
    wait_until(
        lambda: Delivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.SUCCEEDED).exists()
    )
    assert len(receiver.options) == 2
    assert Delivery.objects.get(pk=delivery.pk).attempts == 1


def test_a_refusing_target_is_never_sent_to(celery_worker: object, receiver: Receiver) -> None:
    receiver.options_handler = consent(allowed_origin="someone-else.example")
    endpoint = validating_endpoint(receiver)
    wait_until(lambda: state_of(endpoint) == ValidationState.REFUSED, what="refused")
    assert "someone-else.example" in Endpoint.objects.get(pk=endpoint.pk).validation_reason

    event = emit()
    delivery_waits(event)
    # The sweeper leaves it alone too: its rows wait for a handshake, not a wake.
    services.sweep()
    delivery_waits(event)
    assert receiver.requests == []
    # A probe (the portal's "test, then resume") is refused as well.
    Endpoint.objects.filter(pk=endpoint.pk).update(state="suspended")
    probe = services.endpoint_test_now(endpoint_id=endpoint.pk)
    assert probe.status_code is None
    assert "consented" in probe.failure
    assert receiver.requests == []


def test_a_lower_granted_rate_becomes_the_endpoint_limit(
    celery_worker: object, receiver: Receiver
) -> None:
    receiver.options_handler = consent(rate="2")
    endpoint = validating_endpoint(receiver, rate_limit_per_second=10)
    [options] = receiver.wait_for_options(1)
    assert options.headers["WebHook-Request-Rate"] == "600"
    wait_until(lambda: state_of(endpoint) == ValidationState.VALIDATED, what="validated")
    assert Endpoint.objects.get(pk=endpoint.pk).validation_allowed_rate == 2

    with transaction.atomic():
        events = [services.emit("invoice.paid", {"n": n}) for n in range(4)]
    receiver.wait_for(2)
    later = timezone.now() + timedelta(seconds=30)
    # The other two wait for the granted minute, deferred without spending an attempt.
    wait_until(
        lambda: (
            Delivery.objects.filter(
                event__in=events, status=DeliveryStatus.PENDING, next_attempt_at__gt=later
            ).count()
            == 2
        ),
        what="two deliveries deferred by the granted rate",
    )
    assert len(receiver.requests) == 2
    assert not Delivery.objects.filter(
        event__in=events, status=DeliveryStatus.PENDING, attempts__gt=0
    ).exists()


def test_a_url_change_asks_the_new_target(celery_worker: object, receiver: Receiver) -> None:
    receiver.options_handler = consent()
    endpoint = validating_endpoint(receiver)
    wait_until(lambda: state_of(endpoint) == ValidationState.VALIDATED, what="validated")

    with Receiver.running() as other:
        other.options_handler = ok_without_consent
        response = operator_api().patch(
            f"/api/v1/endpoints/{endpoint.pk}",
            data=json.dumps({"url": other.url}),
            content_type="application/json",
        )
        assert response.status_code == 200, response.content
        assert response.json()["validation_state"] == "pending"
        other.wait_for_options(1)
        wait_until(lambda: state_of(endpoint) == ValidationState.REFUSED, what="refused")

        event = emit()
        delivery_waits(event)
        assert other.requests == []
        assert receiver.requests == []

        other.options_handler = consent()
        services.endpoint_request_validation(endpoint_id=endpoint.pk)
        [request] = other.wait_for(1)
        assert json.loads(request.body)["id"] == str(event.id)
    assert receiver.requests == []


def test_an_unanswered_handshake_is_tried_again_by_itself(
    celery_worker: object, receiver: Receiver, settings: SettingsWrapper
) -> None:
    settings.WEBHOOKS_VALIDATION_RETRY_SECONDS = 0.1
    receiver.options_handler = consent()
    with receiver.down():
        endpoint = validating_endpoint(receiver)
        wait_until(
            lambda: Endpoint.objects.get(pk=endpoint.pk).validation_tries == 1,
            what="one unanswered try",
        )
        stored = Endpoint.objects.get(pk=endpoint.pk)
        assert stored.validation_state == ValidationState.PENDING
        assert "no answer to OPTIONS" in stored.validation_reason
        assert stored.validation_next_at is not None
    event = emit()

    def periodic_look() -> bool:
        validation.handshakes_due()  # what beat runs every sweep interval
        return state_of(endpoint) == ValidationState.VALIDATED

    wait_until(periodic_look, what="validated by an automatic retry")
    [request] = receiver.wait_for(1)
    assert json.loads(request.body)["id"] == str(event.id)


def test_the_api_contract(celery_worker: object, receiver: Receiver) -> None:
    client = operator_api()
    created = client.post(
        "/api/v1/endpoints",
        data=json.dumps({"url": receiver.url, "event_types": ["*"]}),
        content_type="application/json",
    ).json()
    assert created["validation"] == "none"
    assert created["validation_state"] is None
    refused = client.post(f"/api/v1/endpoints/{created['id']}/validate")
    assert refused.status_code == 409
    bad = client.patch(
        f"/api/v1/endpoints/{created['id']}",
        data=json.dumps({"validation": "maybe"}),
        content_type="application/json",
    )
    assert bad.status_code == 400
    assert "validation" in bad.json()
    assert receiver.options == []


def test_portal_made_endpoints_take_the_setting(
    settings: SettingsWrapper, receiver: Receiver
) -> None:
    settings.WEBHOOKS_PORTAL_ENDPOINT_VALIDATION = "cloudevents"
    settings.WEBHOOKS_PORTAL_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    endpoint, _ = services.endpoint_create(
        url=receiver.url, event_types=["*"], chosen_by_tenant=True, tenant="acme"
    )
    assert endpoint.validation == "cloudevents"
    assert endpoint.validation_state == ValidationState.PENDING
    plain, _ = services.endpoint_create(url=receiver.url, event_types=["*"])
    assert plain.validation == "none"
    assert plain.validation_state is None


def test_no_origin_is_refused(settings: SettingsWrapper, receiver: Receiver) -> None:
    settings.WEBHOOKS_VALIDATION_ORIGIN = ""
    settings.ALLOWED_HOSTS = ["*"]
    with pytest.raises(services.EndpointInvalid) as caught:
        services.endpoint_create(url=receiver.url, event_types=["*"], validation="cloudevents")
    assert "validation" in caught.value.errors
    settings.WEBHOOKS_PORTAL_ENDPOINT_VALIDATION = "cloudevents"
    ids = [e.id for e in checks.run_checks() if e.id and e.id.startswith("webhooks.E03")]
    assert ids == ["webhooks.E030"]


def test_turning_the_handshake_off_sends_what_waited(
    celery_worker: object, receiver: Receiver
) -> None:
    receiver.options_handler = ok_without_consent
    endpoint = validating_endpoint(receiver)
    wait_until(lambda: state_of(endpoint) == ValidationState.REFUSED, what="refused")
    event = emit()
    delivery_waits(event)

    updated = services.endpoint_update(endpoint=endpoint, validation="none")
    assert updated.validation_state is None
    [request] = receiver.wait_for(1)
    assert json.loads(request.body)["id"] == str(event.id)
    assert "WebHook-Request-Origin" not in request.headers


def test_the_handshake_goes_through_the_ssrf_guard_at_connect_time(
    celery_worker: object, receiver: Receiver, settings: SettingsWrapper
) -> None:
    receiver.options_handler = consent()
    settings.WEBHOOKS_PORTAL_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    endpoint, _ = services.endpoint_create(
        url=receiver.url, event_types=["*"], chosen_by_tenant=True, tenant="acme", **FAST
    )
    Endpoint.objects.filter(pk=endpoint.pk).update(validation="cloudevents")
    # The tenant's allowance is withdrawn after the URL was saved: the OPTIONS request is
    # checked when it connects, like any delivery.
    settings.WEBHOOKS_PORTAL_ALLOWED_NETWORKS = []
    services.endpoint_request_validation(endpoint_id=endpoint.pk)
    wait_until(lambda: state_of(endpoint) == ValidationState.REFUSED, what="refused")
    assert "SSRF guard" in Endpoint.objects.get(pk=endpoint.pk).validation_reason
    assert receiver.options == []


def test_a_handshake_ends_by_its_deadline(celery_worker: object, receiver: Receiver) -> None:
    def slow(request: ReceivedRequest) -> Reply:
        return Reply(200, b"", {"WebHook-Allowed-Origin": "*"}, delay_seconds=5.0)

    receiver.options_handler = slow
    endpoint = validating_endpoint(receiver, connect_timeout_seconds=0.5, read_timeout_seconds=0.5)
    started = timezone.now()
    wait_until(
        lambda: Endpoint.objects.get(pk=endpoint.pk).validation_tries == 1,
        timeout=4.0,
        what="an unanswered try, cut at connect + read timeout",
    )
    stored = Endpoint.objects.get(pk=endpoint.pk)
    assert stored.validation_state == ValidationState.PENDING
    assert "no answer to OPTIONS" in stored.validation_reason
    assert stored.validation_checked_at is not None
    assert (stored.validation_checked_at - started).total_seconds() < 3
