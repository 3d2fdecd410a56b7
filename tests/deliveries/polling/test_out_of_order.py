"""No message is skipped when the transactions that fan out commit in another order than
they wrote: a read between the two commits must not step over the earlier transaction's
row (real PostgreSQL, two connections)."""

import threading

import pytest
from django.db import connection, transaction
from django.utils import timezone

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus, Endpoint, Event
from deliveries.polling import services as polling
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _insert(endpoint: Endpoint, label: str) -> int:
    """What a fan-out writes for one event: its delivery row."""
    event = Event.objects.create(
        type="invoice.paid", occurred_at=timezone.now(), data={"invoice": label, "amount": 1}
    )
    return Delivery.objects.create(
        event=event, endpoint=endpoint, status=DeliveryStatus.AVAILABLE
    ).pk


def test_a_read_between_two_commits_in_reverse_order_skips_nothing() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the position is the inserting transaction's id on PostgreSQL")
    endpoint, _ = services.endpoint_create(url="", event_types=["invoice.paid"], mode="poll")
    first_wrote, second_committed, first_may_commit = (threading.Event() for _ in range(3))
    ids: dict[str, int] = {}

    def first() -> None:  # begins and writes first, commits last
        try:
            with transaction.atomic():
                ids["first"] = _insert(endpoint, "first")
                first_wrote.set()
                assert first_may_commit.wait(20)
        finally:
            connection.close()

    def second() -> None:  # writes after the first, commits before it
        assert first_wrote.wait(20)
        try:
            with transaction.atomic():
                ids["second"] = _insert(endpoint, "second")
        finally:
            connection.close()
            second_committed.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    try:
        assert second_committed.wait(20)
        # The second row is committed and its id is the larger: a feed by id would hand it
        # out now, and its iterator would step over the first row when that one commits.
        assert ids["first"] < ids["second"]
        between = polling.feed_read(endpoint=endpoint)
    finally:
        first_may_commit.set()
        for thread in threads:
            thread.join(20)
    assert between.data == []  # held back while the older transaction runs
    read: list[str] = []
    iterator = between.iterator

    def more() -> bool:
        # Visible once every older transaction of the cluster has ended (others' too).
        nonlocal iterator
        page = polling.feed_read(endpoint=endpoint, iterator=iterator)
        read.extend(m["payload"]["data"]["invoice"] for m in page.data)
        iterator = page.iterator
        return len(read) >= 2

    wait_until(more, what="both rows")
    assert read == ["first", "second"]
