"""OpenTelemetry spans of emit, fan-out, each attempt, receiving and processing, checked
with the SDK's in-memory exporter on the real stack; and no spans, at no cost, without a
tracer provider or without the API."""

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from deliveries import services
from deliveries.models import DeliveryStatus
from examples.payments.models import Order
from receivers import services as receiving
from receivers.models import InboxEvent
from tests.conftest import wait_until
from tests.deliveries.helpers import settled
from tests.fixtures import make_endpoint
from tests.receiver import Receiver
from webhooks_core import tracing

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACE_ID = int("4bf92f3577b34da6a3ce929d0e0e4736", 16)
PARENT_ID = int("00f067aa0ba902b7", 16)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    try:
        yield exporter
    finally:
        tracing.use_provider(None)
        provider.shutdown()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_no_provider_means_no_span() -> None:
    # The API is installed (a dev dependency) but no provider is configured.
    assert tracing._tracer() is None
    with tracing.span("anything") as span:
        assert span is None
    assert tracing.traceparent_of(None) is None


def test_no_api_means_no_span(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "_api", None)  # as if opentelemetry-api were absent
    tracing.use_provider(TracerProvider())
    try:
        with tracing.span("anything") as span:
            assert span is None
        tracing.annotate_current({"a": 1})
    finally:
        tracing.use_provider(None)


@pytest.mark.django_db(transaction=True)
def test_emit_fan_out_and_every_attempt_have_spans_in_the_events_trace(
    celery_worker: object, receiver: Receiver, spans: InMemorySpanExporter
) -> None:
    endpoint, _ = make_endpoint(receiver, event_types=["order.*"])
    receiver.script(500, 200)

    event = services.emit("order.created", {"id": 1}, traceparent=TP)

    requests = receiver.wait_for(2)
    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="success after a retry")
    wait_until(lambda: len(named(spans, "POST")) == 2, what="two attempt spans")

    [emit] = named(spans, "webhooks emit")
    assert emit.kind == SpanKind.PRODUCER
    assert emit.context.trace_id == TRACE_ID
    assert emit.parent is not None
    assert emit.parent.span_id == PARENT_ID
    assert attrs(emit)["webhooks.event.id"] == str(event.id)
    # The event carries the emit span's context, so what follows joins it.
    event.refresh_from_db()
    assert event.traceparent.split("-")[2] == f"{emit.context.span_id:016x}"

    [fan_out] = named(spans, "webhooks fan-out")
    assert fan_out.parent is not None
    assert fan_out.parent.span_id == emit.context.span_id
    assert attrs(fan_out)["webhooks.deliveries"] == 1

    first, second = sorted(named(spans, "POST"), key=lambda s: attrs(s)["webhooks.attempt"])
    for span in (first, second):
        assert span.kind == SpanKind.CLIENT
        assert span.context.trace_id == TRACE_ID
        assert span.parent is not None
        assert span.parent.span_id == emit.context.span_id
        assert attrs(span)["http.request.method"] == "POST"
        assert attrs(span)["server.address"] == "127.0.0.1"
        assert attrs(span)["server.port"] == receiver.port
        assert attrs(span)["webhooks.endpoint.id"] == str(endpoint.pk)
    assert attrs(first)["webhooks.attempt"] == 1
    assert "http.request.resend_count" not in attrs(first)
    assert attrs(first)["http.response.status_code"] == 500
    assert attrs(first)["webhooks.outcome"] == "retry"
    assert attrs(first)["error.type"] == "500"
    assert first.status.status_code == StatusCode.ERROR
    assert attrs(second)["http.request.resend_count"] == 1
    assert attrs(second)["http.response.status_code"] == 200
    assert attrs(second)["webhooks.outcome"] == "succeeded"
    assert second.status.status_code != StatusCode.ERROR
    # Each request names its own attempt span as the parent: the receiver's span nests.
    for request, span in zip(requests, (first, second), strict=True):
        _, trace_id, parent_id, _ = request.headers["traceparent"].split("-")
        assert (trace_id, parent_id) == (f"{TRACE_ID:032x}", f"{span.context.span_id:016x}")


@pytest.mark.django_db(transaction=True)
def test_receiving_and_processing_join_the_senders_trace(
    celery_worker: object, live_server: Any, spans: InMemorySpanExporter
) -> None:
    Order.objects.create(reference="ord_t", amount=100, currency="EUR")
    _, secret = services.endpoint_create(
        url=f"{live_server.url}/receivers/traced/", event_types=["payment.*"]
    )
    receiving.source_create(slug="traced", scheme="ours", secret=secret)

    data = {"payment_id": "pay_t", "order": "ord_t", "amount": 100, "currency": "EUR"}
    event = services.emit("payment.created", {**data, "version": 1}, traceparent=TP)
    wait_until(
        lambda: InboxEvent.objects.filter(event_id=str(event.id), status="processed").exists(),
        timeout=30,
        what="processed",
    )
    wait_until(lambda: named(spans, "webhooks process"), what="the processing span")

    [attempt] = named(spans, "POST")
    [received] = named(spans, "POST /receivers/<slug>/")
    assert received.kind == SpanKind.SERVER
    assert received.context.trace_id == TRACE_ID
    assert received.parent is not None
    assert received.parent.span_id == attempt.context.span_id
    assert attrs(received)["http.response.status_code"] == 200
    assert attrs(received)["http.route"] == "/receivers/<slug>/"
    assert attrs(received)["webhooks.event.id"] == str(event.id)
    assert attrs(received)["webhooks.outcome"] == "accepted"

    [processed] = named(spans, "webhooks process")
    assert processed.kind == SpanKind.CONSUMER
    assert processed.context.trace_id == TRACE_ID
    assert attrs(processed)["webhooks.outcome"] == "processed"
    assert attrs(processed)["webhooks.source"] == "traced"
