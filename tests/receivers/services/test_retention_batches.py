"""Inbox retention runs in batches (short transactions), and its default outlives providers'
redelivery windows."""

from django.db import connection
from django.test.utils import CaptureQueriesContext
from pytest_django.fixtures import Settings

from receivers import conf, services
from receivers.models import InboxEvent, InboxStatus
from tests.fixtures import MakeSource
from tests.receivers.helpers import row


def statements(queries: CaptureQueriesContext, verb: str) -> int:
    return sum(
        1
        for q in queries.captured_queries
        if q["sql"].startswith(verb) and "receivers_inboxevent" in q["sql"]
    )


def test_inbox_retention_works_in_batches(make_source: MakeSource, settings: Settings) -> None:
    settings.WEBHOOKS_SWEEP_BATCH_SIZE = 2
    settings.RECEIVERS_BODY_RETENTION_DAYS = 30
    settings.RECEIVERS_INBOX_RETENTION_DAYS = 90
    source, _ = make_source()
    for _ in range(5):
        row(source, InboxStatus.PROCESSED, age_days=100)
    for _ in range(3):
        row(source, InboxStatus.FAILED, age_days=40)  # body cleared, row kept
    fresh = row(source, InboxStatus.PROCESSED, age_days=10)

    with CaptureQueriesContext(connection) as queries:
        purged, deleted = services.inbox_apply_retention()

    assert (purged, deleted) == (8, 5)
    assert statements(queries, "UPDATE") == 4  # 2 + 2 + 2 + 2 bodies
    assert statements(queries, "DELETE") == 3  # 2 + 2 + 1 rows
    assert InboxEvent.objects.count() == 4
    fresh.refresh_from_db()
    assert fresh.raw_body is not None


def test_default_inbox_retention_is_at_least_a_week() -> None:
    assert conf.get().inbox_retention_days >= 7
