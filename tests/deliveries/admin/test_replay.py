"""Replays: preview, batches, API, management command. No worker needed here;
the end-to-end replay over HTTP is in test_console_pipeline.py."""

import json
import uuid
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from pytest_django.fixtures import Settings as SettingsWrapper
from rest_framework.test import APIClient

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus, Replay, ReplayStatus
from deliveries.operator.replay import ReplayFilters, replays_resume_stalled
from tests.deliveries.admin.helpers import event_at, hours_ago
from tests.fixtures import new_endpoint

pytestmark = pytest.mark.django_db

API = "/api/v1/replays"


def post(api: APIClient, payload: Any) -> Any:
    return api.post(API, data=json.dumps(payload), content_type="application/json")


@pytest.fixture
def world() -> dict[str, Any]:
    """Two endpoints, events inside and outside a two-hour range."""
    invoices = new_endpoint("https://a.example.com/hook", event_types=["invoice.*"])
    everything = new_endpoint("https://b.example.com/hook", event_types=["*"])
    inside = [
        event_at("invoice.paid", hours_ago(1.5)),
        event_at("invoice.voided", hours_ago(1.0)),
        event_at("order.created", hours_ago(0.5)),
    ]
    outside = [event_at("invoice.paid", hours_ago(5)), event_at("invoice.paid", hours_ago(0.01))]
    return {"invoices": invoices, "everything": everything, "inside": inside, "outside": outside}


def range_filters(**extra: Any) -> ReplayFilters:
    return ReplayFilters(since=hours_ago(2), until=hours_ago(0.1), **extra)


def test_preview_counts_event_times_subscribed_endpoints(world: dict[str, Any]) -> None:
    preview = services.replay_preview(filters=range_filters())
    # invoice.* events reach both endpoints, order.created only the "*" one.
    assert (preview.events, preview.deliveries, preview.endpoints) == (3, 5, 2)

    only_invoices = services.replay_preview(filters=range_filters(event_types=("invoice.*",)))
    assert (only_invoices.events, only_invoices.deliveries) == (2, 4)

    one_endpoint = services.replay_preview(
        filters=range_filters(endpoint_ids=(world["invoices"].pk,))
    )
    assert (one_endpoint.events, one_endpoint.deliveries, one_endpoint.endpoints) == (2, 2, 1)
    assert Delivery.objects.count() == 0  # a preview writes nothing


def test_replay_runs_in_batches_with_a_cursor(
    world: dict[str, Any], settings: SettingsWrapper
) -> None:
    settings.WEBHOOKS_REPLAY_BATCH_SIZE = 2
    replay, preview = services.replay_create(filters=range_filters(), requested_via="test")
    assert replay.status == ReplayStatus.PENDING
    assert replay.expected_deliveries == preview.deliveries == 5

    assert services.replay_step(replay_id=replay.pk, dispatch_next=False) is True
    replay.refresh_from_db()
    assert replay.status == ReplayStatus.RUNNING
    assert replay.events_done == 2
    assert services.replay_step(replay_id=replay.pk, dispatch_next=False) is False
    replay.refresh_from_db()
    assert replay.status == ReplayStatus.DONE
    assert replay.deliveries_created == 5
    assert replay.completed_at is not None
    # A late duplicate task message changes nothing.
    assert services.replay_step(replay_id=replay.pk, dispatch_next=False) is False
    assert Delivery.objects.count() == 5

    rows = Delivery.objects.filter(replay=replay)
    assert {d.event_id for d in rows} == {e.pk for e in world["inside"]}
    assert all(d.is_replay and d.status == DeliveryStatus.PENDING for d in rows)


def test_suspended_endpoint_gets_held_replays_and_stalled_replays_resume(
    world: dict[str, Any], settings: SettingsWrapper
) -> None:
    services.endpoint_suspend(endpoint_id=world["invoices"].pk, reason="test")
    replay, _ = services.replay_create(
        filters=range_filters(endpoint_ids=(world["invoices"].pk,)), requested_via="test"
    )
    settings.WEBHOOKS_WAKE_GRACE_SECONDS = 0
    Replay.objects.filter(pk=replay.pk).update(updated_at=hours_ago(1))
    assert replays_resume_stalled() == 1  # (its message goes to the broker; we run it here)
    services.replay_run_inline(replay_id=replay.pk)
    statuses = set(Delivery.objects.filter(replay=replay).values_list("status", flat=True))
    assert statuses == {DeliveryStatus.HELD}


def test_replay_filters_are_validated(world: dict[str, Any]) -> None:
    with pytest.raises(services.ReplayInvalid) as bad_range:
        services.replay_preview(filters=ReplayFilters(since=hours_ago(1), until=hours_ago(2)))
    assert bad_range.value.field == "until"
    with pytest.raises(services.ReplayInvalid) as unknown:
        services.replay_preview(filters=range_filters(endpoint_ids=(uuid.uuid4(),)))
    assert unknown.value.field == "endpoint_ids"
    with pytest.raises(services.ReplayInvalid) as bad_type:
        services.replay_preview(filters=range_filters(event_types=("in*voice",)))
    assert bad_type.value.field == "event_types"


# --- POST /api/v1/replays -------------------------------------------------------------------


def test_api_dry_run_counts_and_creates_nothing(api: APIClient, world: dict[str, Any]) -> None:
    response = post(
        api,
        {
            "since": hours_ago(2).isoformat(),
            "until": hours_ago(0.1).isoformat(),
            "event_types": ["invoice.*"],
            "dry_run": True,
        },
    )
    assert response.status_code == 200, response.content
    assert json.loads(response.content) == {
        "dry_run": True,
        "events": 2,
        "deliveries": 4,
        "endpoints": 2,
    }
    assert not Replay.objects.exists()


def test_api_creates_a_replay_and_shows_its_progress(api: APIClient, world: dict[str, Any]) -> None:
    payload = {
        "since": hours_ago(2).isoformat(),
        "until": hours_ago(0.1).isoformat(),
        "endpoint_ids": [str(world["everything"].pk)],
    }
    response = post(api, payload)
    assert response.status_code == 202, response.content
    data = json.loads(response.content)
    assert data["dry_run"] is False
    assert (data["events"], data["deliveries"], data["status"]) == (3, 3, "pending")
    assert data["requested_via"] == "api token: tests"
    services.replay_run_inline(replay_id=data["id"])
    progress = json.loads(api.get(f"{API}/{data['id']}").content)
    assert (progress["status"], progress["deliveries_created"]) == ("done", 3)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"until": "2026-01-01T00:00:00Z"}, "since"),
        ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "until"),
        ({"since": "yesterday", "until": "2026-01-01T00:00:00Z"}, "since"),
        (
            {"since": "2026-01-01T00:00Z", "until": "2026-01-02T00:00Z", "event_types": [""]},
            "event_types",
        ),
        (
            {"since": "2026-01-01T00:00Z", "until": "2026-01-02T00:00Z", "event_types": "x"},
            "event_types",
        ),
        (
            {"since": "2026-01-01T00:00Z", "until": "2026-01-02T00:00Z", "endpoint_ids": ["nope"]},
            "endpoint_ids",
        ),
        (
            {
                "since": "2026-01-01T00:00Z",
                "until": "2026-01-02T00:00Z",
                "endpoint_ids": [str(uuid.uuid4())],
            },
            "endpoint_ids",
        ),
        (
            {"since": "2026-01-01T00:00Z", "until": "2026-01-02T00:00Z", "dry_run": "maybe"},
            "dry_run",
        ),
    ],
)
def test_api_bad_input_is_400_with_the_field(api: APIClient, payload: Any, field: str) -> None:
    response = post(api, payload)
    assert response.status_code == 400, response.content
    assert field in json.loads(response.content)


def test_api_needs_a_token() -> None:
    response = APIClient().post(API, data="{}", content_type="application/json")
    assert response.status_code == 401


# --- manage.py replay ---------------------------------------------------------------------


def test_command_dry_run_and_replay(world: dict[str, Any]) -> None:
    since, until = hours_ago(2).isoformat(), hours_ago(0.1).isoformat()
    out = StringIO()
    call_command(
        "replay",
        "--since",
        since,
        "--until",
        until,
        "--event-type",
        "order.*",
        "--dry-run",
        stdout=out,
    )
    assert "1 deliveries of 1 events to 1 endpoints would be sent" in out.getvalue()
    assert not Replay.objects.exists()

    out = StringIO()
    with transaction.atomic():
        call_command("replay", "--since", since, "--until", until, stdout=out)
    replay = Replay.objects.get()
    assert f"replay #{replay.pk}: 5 deliveries of 3 events created" in out.getvalue()
    assert replay.requested_via == "management command"
    assert replay.status == ReplayStatus.DONE


def test_command_refuses_bad_input(world: dict[str, Any]) -> None:
    with pytest.raises(CommandError, match="until"):
        call_command(
            "replay", "--since", hours_ago(1).isoformat(), "--until", hours_ago(2).isoformat()
        )
    with pytest.raises(CommandError):
        call_command("replay", "--since", "not a date", "--until", hours_ago(2).isoformat())


def test_preview_is_one_query_per_type_not_per_event(
    world: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    for n in range(30):
        event_at("invoice.paid", hours_ago(1) + timedelta(seconds=n))
    with django_assert_max_num_queries(3):
        services.replay_preview(filters=range_filters())
