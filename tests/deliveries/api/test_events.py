"""The HTTP API v1: events (emit, idempotency, list, read with deliveries)."""

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from deliveries.models import (
    Delivery,
    DeliveryStatus,
    Event,
)
from tests.deliveries.api.helpers import (
    API,
    Json,
    assert_field_error,
    body,
    create_endpoint,
    make_event,
    post_json,
    post_raw,
)

pytestmark = pytest.mark.django_db


# --- events ----------------------------------------------------------------------------


def test_post_event_is_202_with_id(api: APIClient) -> None:
    before = timezone.now()
    response = post_json(api, f"{API}/events", {"type": "invoice.paid", "data": {"amount": 42}})
    assert response.status_code == 202, response.content
    answer = body(response)
    assert set(answer) == {"id"}
    event = Event.objects.get(pk=answer["id"])
    assert event.type == "invoice.paid"
    assert event.data == {"amount": 42}
    assert event.version == 1
    assert before <= event.occurred_at <= timezone.now()
    assert event.idempotency_key is None


def test_post_event_with_version_and_occurred_at(api: APIClient) -> None:
    response = post_json(
        api,
        f"{API}/events",
        {
            # A declared type whose newest version is 3 (tests/event_catalogue.py).
            "type": "invoice.refunded",
            "data": [1, "two", None, {"deep": {"er": [True]}}],
            "version": 3,
            "occurred_at": "2026-04-15T12:12:34+02:00",
        },
    )
    assert response.status_code == 202, response.content
    event = Event.objects.get(pk=body(response)["id"])
    assert event.version == 3
    assert event.occurred_at == datetime(2026, 4, 15, 10, 12, 34, tzinfo=UTC)
    assert event.data == [1, "two", None, {"deep": {"er": [True]}}]


@pytest.mark.parametrize("data", [{}, [], "text", 0, True, {"big": 10**30}, {"ü": "☕"}])
def test_post_event_accepts_any_json_data(api: APIClient, data: Any) -> None:
    response = post_json(api, f"{API}/events", {"type": "a.b", "data": data})
    assert response.status_code == 202, response.content
    assert Event.objects.get(pk=body(response)["id"]).data == data


def test_idempotency_key_returns_the_same_event(api: APIClient) -> None:
    payload = {"type": "invoice.paid", "data": {"n": 1}}
    first = post_json(api, f"{API}/events", payload, HTTP_IDEMPOTENCY_KEY="order-42-paid")
    second = post_json(api, f"{API}/events", payload, HTTP_IDEMPOTENCY_KEY="order-42-paid")
    assert first.status_code == second.status_code == 202
    assert body(first)["id"] == body(second)["id"]
    assert Event.objects.count() == 1
    assert Event.objects.get().idempotency_key == "order-42-paid"

    third = post_json(api, f"{API}/events", payload, HTTP_IDEMPOTENCY_KEY="order-43-paid")
    assert body(third)["id"] != body(first)["id"]
    without = post_json(api, f"{API}/events", payload)
    assert body(without)["id"] not in {body(first)["id"], body(third)["id"]}
    assert Event.objects.count() == 3


def test_idempotency_key_reused_with_another_body_returns_the_first_event(
    api: APIClient,
) -> None:
    first = post_json(
        api, f"{API}/events", {"type": "a.b", "data": {"v": 1}}, HTTP_IDEMPOTENCY_KEY="k1"
    )
    second = post_json(
        api, f"{API}/events", {"type": "c.d", "data": {"v": 2}}, HTTP_IDEMPOTENCY_KEY="k1"
    )
    assert second.status_code == 202
    assert body(second)["id"] == body(first)["id"]
    event = Event.objects.get()
    assert (event.type, event.data) == ("a.b", {"v": 1})


def test_list_events_is_paginated(api: APIClient) -> None:
    ids = [body(post_json(api, f"{API}/events", {"type": "a.b", "data": {}}))["id"] for _ in "abc"]
    first = body(api.get(f"{API}/events", {"limit": "2"}))
    assert set(first) == {"results", "next"}
    second = body(api.get(first["next"]))
    assert second["next"] is None
    listed = [item["id"] for item in first["results"] + second["results"]]
    assert listed == list(reversed(ids))
    assert all(item["deliveries"] == [] for item in first["results"])


@pytest.mark.parametrize("key", ["k" * 256, "nul\x00byte", "line\nbreak"])
def test_bad_idempotency_key_is_400(api: APIClient, key: str) -> None:
    response = post_json(
        api, f"{API}/events", {"type": "a.b", "data": {}}, HTTP_IDEMPOTENCY_KEY=key
    )
    assert_field_error(response, "Idempotency-Key")
    assert not Event.objects.exists()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"type": "", "data": {}}, "type"),
        ({"type": "   ", "data": {}}, "type"),
        ({"type": None, "data": {}}, "type"),
        ({"data": {}}, "type"),
        ({"type": "invoice paid", "data": {}}, "type"),
        ({"type": "t" * 201, "data": {}}, "type"),
        ({"type": "a\x00b", "data": {}}, "type"),
        ({"type": ["a.b"], "data": {}}, "type"),
        ({"type": "a.b"}, "data"),
        ({"type": "a.b", "data": None}, "data"),
        ({"type": "a.b", "data": {"s": "nul\u0000"}}, "data"),
        ({"type": "a.b", "data": {"nul\u0000key": 1}}, "data"),
        ({"type": "a.b", "data": ["ok", {"deep": ["lone \ud800 surrogate"]}]}, "data"),
        ({"type": "a.b", "data": {"\udfff": 1}}, "data"),
        ({"type": "a.b", "data": {}, "version": 0}, "version"),
        ({"type": "a.b", "data": {}, "version": -1}, "version"),
        ({"type": "a.b", "data": {}, "version": 10**20}, "version"),
        ({"type": "a.b", "data": {}, "version": "two"}, "version"),
        ({"type": "a.b", "data": {}, "version": None}, "version"),
        ({"type": "a.b", "data": {}, "occurred_at": "yesterday"}, "occurred_at"),
        ({"type": "a.b", "data": {}, "occurred_at": 1700000000}, "occurred_at"),
        ({"type": "a.b", "data": {}, "occurred_at": "9999-12-31T23:59:59-14:00"}, "occurred_at"),
        ({"type": "a.b", "data": {}, "occurred_at": "0001-01-01T00:00:00+14:00"}, "occurred_at"),
    ],
)
def test_post_event_bad_input_is_400_with_field_message(
    api: APIClient, payload: Json, field: str
) -> None:
    response = post_json(api, f"{API}/events", payload)
    assert_field_error(response, field)
    assert not Event.objects.exists()


@pytest.mark.parametrize(
    ("raw", "content_type", "expected"),
    [
        ("{not json", "application/json", 400),
        ("[]", "application/json", 400),
        ('[{"type": "a.b", "data": {}}]', "application/json", 400),
        ("null", "application/json", 400),
        ('{"type": "a.b", "data": {"x": 1e400}}', "application/json", 400),
        ('{"type": "a.b", "data": {"x": NaN}}', "application/json", 400),
        ('{"type": "a.b", "data": {"x": Infinity}}', "application/json", 400),
        ('{"type": "a.b", "data": ' + "[" * 50_000 + "]" * 50_000 + "}", "application/json", 400),
        ('{"type": "a.b", "data": {"x": ' + "1" * 5000 + "}}", "application/json", 400),
        ('{"type": "a.b", "data": {"x": "\\ud800"}}', "application/json", 400),
        ('{"type": "a.b", "data": {"x": "\\u0000"}}', "application/json", 400),
        ("type=a.b&data=1", "application/x-www-form-urlencoded", 415),
        ("<xml/>", "application/xml", 415),
    ],
)
def test_post_event_nasty_bodies_never_500(
    api: APIClient, raw: str, content_type: str, expected: int
) -> None:
    response = post_raw(api, f"{API}/events", raw, content_type)
    assert response.status_code == expected, response.content
    assert not Event.objects.exists()


@pytest.mark.parametrize(
    "raw",
    [
        "null",
        "[]",
        "{}",
        '{"type": 1, "data": {}}',
        '{"type": "a.b", "data": {}, "extra": 1}',
        '{"type": "a.b", "data": {}, "occurred_at": "yesterday", "version": 0}',
        '{"type": "a.b", "data": {"x": "\\u0000"}}',
    ],
)
def test_post_event_errors_are_those_of_a_serializer_of_its_own(api: APIClient, raw: str) -> None:
    """One instance validates every body (`views._event_body`): its 400s say exactly what
    a serializer made for the request says, and it keeps nothing from one to the next."""
    import json

    from deliveries.api.serializers import EventCreateSerializer

    response = post_raw(api, f"{API}/events", raw, "application/json")
    own = EventCreateSerializer(data=json.loads(raw))
    assert not own.is_valid()
    assert response.status_code == 400, response.content
    assert body(response) == json.loads(json.dumps(own.errors))
    fine = post_json(api, f"{API}/events", {"type": "a.b", "data": {}})
    assert fine.status_code == 202, fine.content


def test_post_event_deeply_nested_but_parseable_data(api: APIClient) -> None:
    data: Any = "leaf"
    for _ in range(200):
        data = {"d": data}
    response = post_json(api, f"{API}/events", {"type": "a.b", "data": data})
    assert response.status_code == 202
    assert Event.objects.get().data == data


@pytest.mark.usefixtures("inline_fan_out")
def test_get_event_shows_its_deliveries(
    api: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    first = create_endpoint(api)
    second = create_endpoint(api)
    with django_capture_on_commit_callbacks(execute=True):
        posted = post_json(api, f"{API}/events", {"type": "invoice.paid", "data": {"a": 1}})
    event_id = body(posted)["id"]
    # Its two deliveries were made right after its commit; they are given outcomes here.
    deliveries = Delivery.objects.filter(event_id=event_id)
    sent = deliveries.get(endpoint_id=first["id"])
    dead = deliveries.get(endpoint_id=second["id"])
    deliveries.filter(pk=sent.pk).update(
        status=DeliveryStatus.SUCCEEDED, attempts=2, last_status_code=200
    )
    deliveries.filter(pk=dead.pk).update(
        status=DeliveryStatus.DEAD_LETTERED, attempts=12, last_status_code=500
    )

    response = api.get(f"{API}/events/{event_id}")
    assert response.status_code == 200
    shown = body(response)
    assert shown["id"] == event_id
    assert shown["type"] == "invoice.paid"
    assert shown["data"] == {"a": 1}
    assert shown["version"] == 1
    assert shown["occurred_at"]
    by_id = {item["id"]: item for item in shown["deliveries"]}
    assert set(by_id) == {sent.pk, dead.pk}
    assert by_id[sent.pk]["status"] == "succeeded"
    assert by_id[sent.pk]["attempt_count"] == 2
    assert by_id[sent.pk]["endpoint_id"] == first["id"]
    assert by_id[dead.pk]["status"] == "dead_lettered"
    assert by_id[dead.pk]["attempt_count"] == 12
    assert by_id[dead.pk]["last_status_code"] == 500


def test_get_event_without_deliveries(api: APIClient) -> None:
    event = make_event()
    response = api.get(f"{API}/events/{event.pk}")
    assert response.status_code == 200
    assert body(response)["deliveries"] == []


@pytest.mark.parametrize("suffix", [str(uuid.uuid4()), "not-a-uuid", "1", "%27%3B--"])
def test_unknown_or_malformed_event_id_is_404(api: APIClient, suffix: str) -> None:
    assert api.get(f"{API}/events/{suffix}").status_code == 404
