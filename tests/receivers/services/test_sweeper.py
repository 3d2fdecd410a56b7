from datetime import timedelta

import pytest
from django.utils import timezone
from pytest_django.fixtures import Settings

from receivers import services
from receivers.models import InboxEvent, InboxStatus
from tests.fixtures import MakeSource
from tests.receivers.helpers import row

pytestmark = pytest.mark.django_db


def test_due_rows_without_a_message_are_dispatched_once(make_source: MakeSource) -> None:
    source, _ = make_source()
    lost = row(source, InboxStatus.RECEIVED, dispatched_at=None)
    in_flight = row(source, InboxStatus.RECEIVED, dispatched_at=timezone.now())
    later = row(
        source,
        InboxStatus.RETRYING,
        dispatched_at=None,
        next_attempt_at=timezone.now() + timedelta(hours=1),
    )

    assert services.inbox_sweep().due == 1
    lost.refresh_from_db()
    assert lost.dispatched_at is not None
    assert services.inbox_sweep().due == 0  # marked: not sent again within the grace
    for untouched in (in_flight, later):
        dispatched_at = untouched.dispatched_at
        untouched.refresh_from_db()
        assert untouched.dispatched_at == dispatched_at


def test_expired_leases_are_dispatched_again(make_source: MakeSource) -> None:
    source, _ = make_source()
    past = timezone.now() - timedelta(minutes=10)
    row(source, InboxStatus.PROCESSING, lease_expires_at=past, dispatched_at=past)
    row(source, InboxStatus.PROCESSING, lease_expires_at=timezone.now() + timedelta(minutes=5))
    assert services.inbox_sweep().leases_expired == 1


def test_retention(make_source: MakeSource, settings: Settings) -> None:
    settings.RECEIVERS_BODY_RETENTION_DAYS = 30
    settings.RECEIVERS_INBOX_RETENTION_DAYS = 90
    source, _ = make_source()
    fresh = row(source, InboxStatus.PROCESSED, age_days=1)
    old = row(source, InboxStatus.PROCESSED, age_days=40)
    old_failed = row(source, InboxStatus.FAILED, age_days=100)
    old_pending = row(source, InboxStatus.RETRYING, age_days=40, dispatched_at=timezone.now())
    ancient = row(source, InboxStatus.IGNORED, age_days=100)

    purged, deleted = services.inbox_apply_retention()

    assert (purged, deleted) == (3, 1)  # old, old_failed and ancient lose their bodies
    assert not InboxEvent.objects.filter(pk=ancient.pk).exists()
    for kept, has_body in ((fresh, True), (old, False), (old_failed, False), (old_pending, True)):
        kept.refresh_from_db()
        assert (kept.raw_body is not None) == has_body, kept.status


def test_manual_retry_refuses_a_row_in_flight(make_source: MakeSource) -> None:
    source, _ = make_source()
    busy = row(source, InboxStatus.PROCESSING, lease_expires_at=timezone.now())
    with pytest.raises(services.InboxNotRetryable):
        services.inbox_retry(inbox_id=busy.pk)


def test_system_checks_warn_about_short_retention(settings: Settings) -> None:
    from receivers.conf import check_receiver_settings

    settings.RECEIVERS_INBOX_RETENTION_DAYS = 1
    settings.RECEIVERS_BODY_RETENTION_DAYS = 1
    assert [m.id for m in check_receiver_settings(None)] == ["receivers.W001"]
    settings.RECEIVERS_BACKOFF_MAX_SECONDS = 1.0
    settings.RECEIVERS_BACKOFF_BASE_SECONDS = 5.0
    assert "receivers.E002" in [m.id for m in check_receiver_settings(None)]


@pytest.mark.parametrize("name", ["RECEIVERS_LEASE_SECONDS", "RECEIVERS_HANDLER_TIMEOUT_SECONDS"])
def test_system_checks_refuse_a_lease_or_bound_that_is_not_positive(
    settings: Settings, name: str
) -> None:
    from receivers.conf import check_receiver_settings

    setattr(settings, name, 0)
    assert [(m.id, m.msg) for m in check_receiver_settings(None)] == [
        ("receivers.E005", f"{name} must be positive.")
    ]
