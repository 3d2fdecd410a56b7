"""Retention purge: exactly what is past retention goes, in batches of the configured size."""

from datetime import timedelta

import pytest
from django.utils import timezone
from pytest_django.fixtures import Settings

from deliveries import services
from deliveries.models import Attempt, Delivery, DeliveryStatus, Endpoint, Event
from deliveries.tasks import purge
from tests.fixtures import new_endpoint
from webhooks_project.celery import app as celery_app

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoint() -> Endpoint:
    return new_endpoint("http://127.0.0.1:9/hook")


def make_event(endpoint: Endpoint, *, age_days: float, status: str, attempts: int = 1) -> Event:
    created = timezone.now() - timedelta(days=age_days)
    event = Event.objects.create(type="t.x", occurred_at=created, data={"n": 1})
    Event.objects.filter(pk=event.pk).update(created_at=created, fanned_out_at=created)
    delivery = Delivery.objects.create(event=event, endpoint=endpoint, status=status)
    for number in range(1, attempts + 1):
        Attempt.objects.create(
            delivery=delivery, number=number, started_at=created, duration_ms=5.0
        )
    return event


def test_purge_deletes_exactly_what_is_past_retention_in_batches(
    endpoint: Endpoint, settings: Settings
) -> None:
    settings.WEBHOOKS_EVENT_RETENTION_DAYS = 30
    settings.WEBHOOKS_ATTEMPT_RETENTION_DAYS = 7
    old_done = [
        make_event(endpoint, age_days=40, status=s)
        for s in (DeliveryStatus.SUCCEEDED, DeliveryStatus.DEAD_LETTERED)
        for _ in range(3)
    ]  # 6 events past retention, all final
    old_cancelled = make_event(endpoint, age_days=31, status=DeliveryStatus.CANCELLED)
    old_pending = make_event(endpoint, age_days=40, status=DeliveryStatus.PENDING)
    old_held = make_event(endpoint, age_days=40, status=DeliveryStatus.HELD)
    recent_with_old_attempts = make_event(
        endpoint, age_days=10, status=DeliveryStatus.SUCCEEDED, attempts=3
    )
    fresh = make_event(endpoint, age_days=1, status=DeliveryStatus.SUCCEEDED)

    result = services.purge_expired(batch_size=2)

    gone = {e.pk for e in old_done} | {old_cancelled.pk}
    kept = {old_pending.pk, old_held.pk, recent_with_old_attempts.pk, fresh.pk}
    assert set(Event.objects.values_list("pk", flat=True)) == kept
    assert not Delivery.objects.filter(event_id__in=gone).exists()
    # Attempts past 7 days go even where the event stays; the fresh one stays.
    assert list(Attempt.objects.values_list("delivery__event_id", flat=True)) == [fresh.pk]
    assert Delivery.objects.filter(event=recent_with_old_attempts).exists()
    assert result.events_deleted == 7
    assert result.event_batches == 4  # 2 + 2 + 2 + 1
    # 7 days: old_pending, old_held (1 each), the 3 of recent_with_old_attempts and the 7
    # attempts of the events purged afterwards are all older than a week.
    assert result.attempts_deleted == 12
    assert result.attempt_batches == 6

    again = services.purge_expired(batch_size=2)
    assert (again.events_deleted, again.attempts_deleted) == (0, 0)


def test_purge_task_uses_the_configured_retention(endpoint: Endpoint, settings: Settings) -> None:
    settings.WEBHOOKS_EVENT_RETENTION_DAYS = 90
    settings.WEBHOOKS_ATTEMPT_RETENTION_DAYS = 90
    make_event(endpoint, age_days=40, status=DeliveryStatus.SUCCEEDED)
    assert purge() == {
        "attempts_deleted": 0,
        "attempt_batches": 0,
        "events_deleted": 0,
        "event_batches": 0,
        "portal_links_deleted": 0,
    }
    settings.WEBHOOKS_EVENT_RETENTION_DAYS = 30
    assert purge()["events_deleted"] == 1


def test_purge_is_on_the_beat_schedule() -> None:
    entry = celery_app.conf.beat_schedule["deliveries-purge"]
    assert entry["task"] == "deliveries.tasks.purge"
