"""The HTTP API v1: deliveries (list, filters, pagination, read with attempts, retry)."""

import base64
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from deliveries import services
from deliveries.models import (
    Attempt,
    DeliveryStatus,
)
from tests.deliveries.api.helpers import (
    API,
    assert_field_error,
    body,
    create_endpoint,
    make_delivery,
    make_event,
    patch_json,
    post_json,
)

pytestmark = pytest.mark.django_db


# --- deliveries ------------------------------------------------------------------------


@pytest.fixture
def population(api: APIClient) -> dict[str, Any]:
    """Two endpoints and a few events with deliveries in different states."""
    ep_a = create_endpoint(api)["id"]
    ep_b = create_endpoint(api)["id"]
    paid = make_event("invoice.paid")
    created = make_event("customer.created")
    rows = {
        "a_paid": make_delivery(paid, ep_a, status=DeliveryStatus.SUCCEEDED, attempts=1),
        "b_paid": make_delivery(paid, ep_b, status=DeliveryStatus.DEAD_LETTERED, attempts=3),
        "a_created": make_delivery(created, ep_a, status=DeliveryStatus.PENDING),
        "b_created": make_delivery(created, ep_b, status=DeliveryStatus.PENDING),
    }
    return {"ep_a": ep_a, "ep_b": ep_b, "paid": paid, "created": created, **rows}


def _ids(response: Any) -> set[int]:
    assert response.status_code == 200, response.content
    page = body(response)
    assert set(page) == {"results", "next"}
    return {item["id"] for item in page["results"]}


def test_list_deliveries_and_filters(api: APIClient, population: dict[str, Any]) -> None:
    p = population
    everything = {p[k].pk for k in ("a_paid", "b_paid", "a_created", "b_created")}
    assert _ids(api.get(f"{API}/deliveries")) == everything
    assert _ids(api.get(f"{API}/deliveries", {"status": "pending"})) == {
        p["a_created"].pk,
        p["b_created"].pk,
    }
    assert _ids(api.get(f"{API}/deliveries", {"status": "dead_lettered"})) == {p["b_paid"].pk}
    assert _ids(api.get(f"{API}/deliveries", {"status": "held"})) == set()
    assert _ids(api.get(f"{API}/deliveries", {"endpoint": p["ep_a"]})) == {
        p["a_paid"].pk,
        p["a_created"].pk,
    }
    assert _ids(api.get(f"{API}/deliveries", {"event_type": "invoice.paid"})) == {
        p["a_paid"].pk,
        p["b_paid"].pk,
    }
    assert _ids(
        api.get(
            f"{API}/deliveries",
            {"status": "pending", "endpoint": p["ep_b"], "event_type": "customer.created"},
        )
    ) == {p["b_created"].pk}
    assert _ids(api.get(f"{API}/deliveries", {"endpoint": str(uuid.uuid4())})) == set()
    assert _ids(api.get(f"{API}/deliveries", {"event_type": "nothing.here"})) == set()
    # An empty parameter is an empty value (the schema says minLength 1), not "no filter".
    for name in ("status", "endpoint", "event_type", "event"):
        assert_field_error(api.get(f"{API}/deliveries?{name}="), name)
    assert_field_error(api.get(f"{API}/deliveries?status=pending&status=held"), "status")


def test_list_delivery_fields(api: APIClient, population: dict[str, Any]) -> None:
    response = api.get(f"{API}/deliveries", {"status": "dead_lettered"})
    (item,) = body(response)["results"]
    assert item["status"] == "dead_lettered"
    assert item["attempt_count"] == 3
    assert item["endpoint_id"] == population["ep_b"]
    assert item["event_id"] == str(population["paid"].pk)
    assert item["is_replay"] is False


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"status": "exploded"}, "status"),
        ({"status": "PENDING"}, "status"),
        ({"status": "dead-lettered"}, "status"),
        ({"endpoint": "not-a-uuid"}, "endpoint"),
        ({"endpoint": "1"}, "endpoint"),
        ({"event_type": "x" * 201}, "event_type"),
        ({"event_type": "a\x00b"}, "event_type"),
    ],
)
def test_list_deliveries_bad_filter_is_400(
    api: APIClient, population: dict[str, Any], query: dict[str, str], field: str
) -> None:
    assert_field_error(api.get(f"{API}/deliveries", query), field)


def test_pagination_walks_next_links(api: APIClient) -> None:
    endpoint_id = create_endpoint(api)["id"]
    made = [make_delivery(make_event(), endpoint_id) for _ in range(7)]

    seen: list[int] = []
    sizes: list[int] = []
    url: str | None = f"{API}/deliveries?limit=3"
    while url is not None:
        response = api.get(url)
        assert response.status_code == 200, response.content
        page = body(response)
        sizes.append(len(page["results"]))
        seen.extend(item["id"] for item in page["results"])
        url = page["next"]
        if url is not None:
            assert url.startswith("http://testserver/api/v1/deliveries")
            assert "limit=3" in url
        assert len(sizes) < 10, "next links never end"
    assert sizes == [3, 3, 1]
    assert len(seen) == len(set(seen))
    # Newest first.
    assert seen == [d.pk for d in reversed(made)]


def test_pagination_keeps_filters_in_next_links(api: APIClient) -> None:
    endpoint_id = create_endpoint(api)["id"]
    for _ in range(3):
        make_delivery(make_event(), endpoint_id, status=DeliveryStatus.PENDING)
        make_delivery(make_event(), endpoint_id, status=DeliveryStatus.SUCCEEDED)
    first = body(api.get(f"{API}/deliveries", {"status": "pending", "limit": "2"}))
    assert len(first["results"]) == 2
    assert first["next"]
    second = body(api.get(first["next"]))
    assert len(second["results"]) == 1
    assert second["next"] is None
    assert all(item["status"] == "pending" for item in first["results"] + second["results"])


@pytest.mark.parametrize(
    "limit", ["0", "000", "-1", "-5", "abc", "", "null", "1.5", "+3", " 3", "3 ", "٣", "1_0"]
)
def test_a_limit_that_is_not_a_whole_number_from_1_is_400(api: APIClient, limit: str) -> None:
    # These once fell back silently to the default page size.
    assert_field_error(api.get(f"{API}/deliveries", {"limit": limit}), "limit")


def test_a_limit_given_twice_is_400(api: APIClient) -> None:
    assert_field_error(api.get(f"{API}/deliveries?limit=2&limit=3"), "limit")


@pytest.mark.parametrize("limit", ["501", "9999999999999999999999", "9" * 5000])
def test_a_limit_above_the_cap_is_the_cap(api: APIClient, limit: str) -> None:
    endpoint_id = create_endpoint(api)["id"]
    make_delivery(make_event(), endpoint_id)
    response = api.get(f"{API}/deliveries", {"limit": limit})
    assert response.status_code == 200
    assert len(body(response)["results"]) == 1


def test_a_limit_with_leading_zeros_is_its_number(api: APIClient) -> None:
    endpoint_id = create_endpoint(api)["id"]
    for _ in range(3):
        make_delivery(make_event(), endpoint_id)
    response = api.get(f"{API}/deliveries", {"limit": "02"})
    assert response.status_code == 200
    assert len(body(response)["results"]) == 2


@pytest.mark.parametrize("query", ["cursor=", "cursor=a&cursor=b"])
def test_an_empty_or_repeated_cursor_is_400(api: APIClient, query: str) -> None:
    assert_field_error(api.get(f"{API}/deliveries?{query}"), "cursor")


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage",
        "%%%",
        "é",
        base64.b64encode(b"p=not-a-time").decode(),
        base64.b64encode(b"o=-5").decode(),
        base64.b64encode(b"r=x").decode(),
        base64.b64encode(b"p=2026-13-45 99:00:00").decode(),
    ],
)
def test_mangled_cursor_is_400(api: APIClient, cursor: str) -> None:
    endpoint_id = create_endpoint(api)["id"]
    make_delivery(make_event(), endpoint_id)
    assert_field_error(api.get(f"{API}/deliveries", {"cursor": cursor}), "cursor")


def test_get_delivery_with_attempts(api: APIClient) -> None:
    endpoint_id = create_endpoint(api)["id"]
    delivery = make_delivery(
        make_event("invoice.paid"),
        endpoint_id,
        status=DeliveryStatus.SUCCEEDED,
        attempts=2,
        last_status_code=200,
    )
    now = timezone.now()
    Attempt.objects.create(
        delivery=delivery,
        number=2,
        started_at=now,
        duration_ms=12.5,
        request_headers={"X-Webhook-Signature": "[redacted]"},
        response_status=200,
        response_body="ok",
    )
    Attempt.objects.create(
        delivery=delivery,
        number=1,
        started_at=now - timedelta(seconds=10),
        duration_ms=3000.0,
        response_status=None,
        error="ReadTimeout: read timed out",
    )

    response = api.get(f"{API}/deliveries/{delivery.pk}")
    assert response.status_code == 200
    shown = body(response)
    assert shown["id"] == delivery.pk
    assert shown["status"] == "succeeded"
    assert shown["attempt_count"] == 2
    assert shown["event_type"] == "invoice.paid"
    assert [a["number"] for a in shown["attempts"]] == [1, 2]
    first, second = shown["attempts"]
    assert first["response_status"] is None
    assert first["error"] == "ReadTimeout: read timed out"
    assert second["response_status"] == 200
    assert second["response_body"] == "ok"
    assert second["duration_ms"] == 12.5
    assert second["request_headers"] == {"X-Webhook-Signature": "[redacted]"}


def test_get_delivery_without_attempts(api: APIClient) -> None:
    delivery = make_delivery(make_event(), create_endpoint(api)["id"])
    response = api.get(f"{API}/deliveries/{delivery.pk}")
    assert response.status_code == 200
    assert body(response)["attempts"] == []
    assert body(response)["status"] == "pending"


@pytest.mark.parametrize(
    "suffix", ["999999", "not-a-number", "1.5", "-1", "99999999999999999999999999", "0x10"]
)
@pytest.mark.parametrize("action", ["", "/retry"])
def test_unknown_or_malformed_delivery_id_is_404(api: APIClient, suffix: str, action: str) -> None:
    method = api.post if action else api.get
    assert method(f"{API}/deliveries/{suffix}{action}").status_code == 404


@pytest.mark.parametrize(
    "status",
    [
        DeliveryStatus.DEAD_LETTERED,
        DeliveryStatus.CANCELLED,
        DeliveryStatus.PENDING,
    ],
)
def test_retry_delivery(api: APIClient, status: str) -> None:
    delivery = make_delivery(
        make_event(),
        create_endpoint(api)["id"],
        status=status,
        attempts=4,
        first_attempt_at=timezone.now() - timedelta(hours=30),
        completed_at=timezone.now(),
    )
    response = api.post(f"{API}/deliveries/{delivery.pk}/retry")
    assert response.status_code == 202, response.content
    shown = body(response)
    assert shown["id"] == delivery.pk
    assert shown["status"] == "pending"
    assert shown["attempt_count"] == 4
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.attempts_before_cycle == 4
    assert delivery.attempts_in_cycle == 0
    assert delivery.first_attempt_at is None
    assert delivery.completed_at is None
    assert delivery.next_attempt_at is not None
    assert delivery.next_attempt_at <= timezone.now()


@pytest.mark.parametrize("status", [DeliveryStatus.SENDING, DeliveryStatus.HELD])
def test_retry_of_in_flight_or_held_delivery_is_409(api: APIClient, status: str) -> None:
    delivery = make_delivery(make_event(), create_endpoint(api)["id"], status=status, attempts=1)
    response = api.post(f"{API}/deliveries/{delivery.pk}/retry")
    assert response.status_code == 409
    assert body(response)["detail"]
    delivery.refresh_from_db()
    assert delivery.status == status


def test_retry_of_a_succeeded_delivery_is_409_and_points_to_replay(api: APIClient) -> None:
    """A retry must not send a delivered event again (replay does)."""
    done = timezone.now()
    delivery = make_delivery(
        make_event(),
        create_endpoint(api)["id"],
        status=DeliveryStatus.SUCCEEDED,
        attempts=1,
        completed_at=done,
    )
    response = api.post(f"{API}/deliveries/{delivery.pk}/retry")
    assert response.status_code == 409
    assert response["Content-Type"].startswith("application/json")
    assert "replay" in body(response)["detail"]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.completed_at) == ("succeeded", 1, done)
    assert delivery.attempts_before_cycle == 0
    # The rule is the service's, so the admin action and any other caller keep it too.
    with pytest.raises(services.DeliveryNotRetryable, match="replay"):
        services.delivery_retry(delivery_id=delivery.pk)


def test_retry_needs_post(api: APIClient) -> None:
    delivery = make_delivery(make_event(), create_endpoint(api)["id"])
    assert api.get(f"{API}/deliveries/{delivery.pk}/retry").status_code == 405


def test_deliveries_are_read_only(api: APIClient) -> None:
    delivery = make_delivery(make_event(), create_endpoint(api)["id"])
    assert post_json(api, f"{API}/deliveries", {}).status_code == 405
    assert patch_json(api, f"{API}/deliveries/{delivery.pk}", {"status": "x"}).status_code == 405
    assert api.delete(f"{API}/deliveries/{delivery.pk}").status_code == 405
