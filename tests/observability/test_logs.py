"""Structured logs during a real delivery and a real inbox event: one JSON line per attempt
and per inbox event, correlated by the event id, with no secret and no payload value."""

import io
import json
import logging
from collections.abc import Iterator

import pytest
from django.test import Client

from deliveries import services
from deliveries.models import DeliveryStatus
from receivers import services as receiver_services
from receivers.models import InboxEvent, InboxStatus
from tests.conftest import wait_until
from tests.deliveries.helpers import settled
from tests.fixtures import make_endpoint
from tests.receiver import Receiver
from tests.receivers.helpers import ours_event, sign_ours
from webhooks_project.logs import build_formatter

PAYLOAD_CANARY = "canary-payload-value-7f3a91"


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """The production formatter on the root logger, writing to a buffer."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(build_formatter("json"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


@pytest.mark.django_db(transaction=True)
def test_attempt_and_inbox_lines_carry_the_correlation_id_and_no_secret(
    celery_worker: object, receiver: Receiver, client: Client, json_log: io.StringIO
) -> None:
    receiver.script(503, 200)
    _, endpoint_secret = make_endpoint(receiver)
    source, source_secret = receiver_services.source_create(slug="logs-src", scheme="ours")

    event = services.emit("invoice.paid", {"note": PAYLOAD_CANARY, "amount": 4200})
    receiver.wait_for(2)
    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="success after a retry")

    body = ours_event("logs.noted", data={"note": PAYLOAD_CANARY}, event_id="evt_logs_1")
    response = client.post(
        f"/receivers/{source.slug}/",
        body,
        content_type="application/json",
        headers=sign_ours([source_secret], body),
    )
    assert response.status_code == 200
    wait_until(
        lambda: InboxEvent.objects.filter(
            event_id="evt_logs_1", status__in=[InboxStatus.PROCESSED, InboxStatus.IGNORED]
        ).exists(),
        what="inbox event handled",
    )
    wait_until(lambda: "inbox event" in json_log.getvalue(), what="inbox log line")

    records = lines(json_log)
    attempts = [r for r in records if r.get("logger") == "deliveries.attempts"]
    assert [(r["event_id"], r["attempt"], r["status_code"], r["outcome"]) for r in attempts] == [
        (str(event.id), 1, 503, "retry_scheduled"),
        (str(event.id), 2, 200, "succeeded"),
    ]
    for record in attempts:
        assert record["endpoint_id"]
        assert isinstance(record["duration_ms"], float)
        assert record["timestamp"]
    inbox = [r for r in records if str(r.get("message", "")).startswith("inbox event")]
    assert inbox
    assert {r["event_id"] for r in inbox} == {"evt_logs_1"}

    everything = json_log.getvalue()
    assert endpoint_secret not in everything
    assert endpoint_secret.removeprefix("whsec_") not in everything
    assert source_secret not in everything
    assert PAYLOAD_CANARY not in everything


def test_sensitive_fields_are_redacted_whatever_the_caller_passes() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
    record.api_token = "tok-123"
    record.payload = {"card": "4242"}
    record.event_id = "e1"

    rendered = json.loads(build_formatter("json").format(record))

    assert rendered["event_id"] == "e1"
    assert rendered["api_token"] == rendered["payload"] == "[redacted]"
    assert rendered["message"] == "hello"


def test_console_format_is_readable() -> None:
    record = logging.LogRecord("deliveries.attempts", logging.INFO, __file__, 1, "hi", None, None)
    record.event_id = "e1"
    text = build_formatter("console").format(record)
    assert "hi" in text
    assert "event_id=e1" in text
    assert not text.startswith("{")


def test_a_metrics_failure_does_not_fail_the_sending_task(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from types import SimpleNamespace

    from deliveries import metrics
    from deliveries.pipeline import attempt_report

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("metrics directory is gone")

    monkeypatch.setattr(metrics, "status_class", broken)
    delivery = SimpleNamespace(event_id="e1", endpoint_id="x", attempts=1)
    attempt = SimpleNamespace(number=1, duration_ms=3.0)

    attempt_report.attempt_recorded(
        delivery=delivery,  # type: ignore[arg-type]
        attempt=attempt,  # type: ignore[arg-type]
        outcome="succeeded",
        status_code=200,
        error="",
    )

    assert "recording the attempt failed" in caplog.text
