"""traceparent: validated, captured at emit time (argument, OpenTelemetry, API header), and
sent with every attempt of the event."""

import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider

from deliveries import services
from deliveries.models import ApiToken, DeliveryStatus, Event
from tests.conftest import wait_until
from tests.deliveries.helpers import settled
from tests.fixtures import api_client, make_endpoint
from tests.receiver import Receiver
from webhooks_core import tracing

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        (TP, True),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", True),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", False),  # zero trace id
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", False),  # zero parent id
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", False),  # upper case
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", False),  # unknown version
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", False),
        ("", False),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n", False),
    ],
)
def test_traceparent_validation(value: str, valid: bool) -> None:
    assert tracing.is_valid(value) is valid


def test_header_values_are_ignored_when_malformed() -> None:
    assert tracing.from_header(f"  {TP} ") == TP
    assert tracing.from_header("garbage") is None
    assert tracing.from_header(None) is None


def test_no_opentelemetry_means_no_traceparent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import fails
    assert tracing.from_opentelemetry() is None


def test_current_opentelemetry_span_is_captured() -> None:
    tracer = TracerProvider().get_tracer("test")
    assert tracing.from_opentelemetry() is None  # no active span
    with tracer.start_as_current_span("product-request") as span:
        context = span.get_span_context()
        captured = tracing.from_opentelemetry()
    assert captured is not None
    assert captured.startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")


@pytest.mark.django_db
def test_emit_refuses_a_malformed_traceparent() -> None:
    with pytest.raises(services.EventRefused) as error:
        services.emit("order.created", {}, traceparent="not-a-trace")
    assert error.value.field == "traceparent"
    assert not Event.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_traceparent_arrives_on_every_attempt(celery_worker: object, receiver: Receiver) -> None:
    make_endpoint(receiver)
    receiver.script(500, 200)

    event = services.emit("order.created", {"id": 1}, traceparent=TP)

    requests = receiver.wait_for(2)
    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="success after a retry")
    assert [r.headers.get("traceparent") for r in requests] == [TP, TP]


@pytest.mark.django_db(transaction=True)
def test_opentelemetry_context_at_emit_reaches_the_receiver(
    celery_worker: object, receiver: Receiver
) -> None:
    make_endpoint(receiver)
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("checkout") as span:
        trace_id = f"{span.get_span_context().trace_id:032x}"
        services.emit("order.created", {"id": 2})

    [request] = receiver.wait_for(1)
    assert request.headers["traceparent"].split("-")[1] == trace_id


@pytest.mark.django_db(transaction=True)
def test_api_request_traceparent_reaches_the_receiver(
    celery_worker: object, receiver: Receiver
) -> None:
    make_endpoint(receiver)
    _, token = ApiToken.issue("tracing")
    client = api_client(token)

    accepted = client.post(
        "/api/v1/events", {"type": "order.created", "data": {}}, format="json", HTTP_TRACEPARENT=TP
    )
    ignored = client.post(
        "/api/v1/events", {"type": "order.paid", "data": {}}, format="json", HTTP_TRACEPARENT="xx"
    )

    assert accepted.status_code == ignored.status_code == 202
    requests = receiver.wait_for(2)
    by_type = {r.headers["X-Webhook-Event"]: r.headers for r in requests}
    assert by_type["order.created"]["traceparent"] == TP
    assert "traceparent" not in by_type["order.paid"]  # a malformed header is dropped
    assert Event.objects.get(pk=accepted.json()["id"]).traceparent == TP
