"""On PostgreSQL, a committed row that an older, still running transaction hides from the
feed: `feed.rows_hidden` says so, and a long poll notified of it reads again soon, so it
answers within moments of that transaction's end, not at the safety recheck."""

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections

from deliveries import services
from deliveries.polling import feed, positions, waiters
from deliveries.polling import services as polling
from tests.conftest import wait_until
from tests.deliveries.polling.helpers import poll_endpoint

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("inline_fan_out")]


@pytest.fixture
def older() -> Iterator[Any]:
    """A connection whose transaction has an id, begun before the test's writes: it hides
    them from the feed until it commits."""
    connection = connections.create_connection("default")
    connection.set_autocommit(False)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_xact_id()")
    try:
        yield connection
    finally:
        connection.rollback()
        connection.close()


def test_a_row_behind_an_older_transaction_is_hidden_until_it_ends(older: Any) -> None:
    endpoint = poll_endpoint("order.created")
    assert not feed.rows_hidden(endpoint.pk)

    services.emit("order.created", {"n": 1})

    assert feed.rows_hidden(endpoint.pk)
    assert feed.rows_after(endpoint.pk, positions.START, 10) == []
    older.commit()
    assert not feed.rows_hidden(endpoint.pk)
    assert len(feed.rows_after(endpoint.pk, positions.START, 10)) == 1


def test_a_long_poll_answers_soon_after_the_hiding_transaction_ends(
    older: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waiters._hub, "listening", True)  # the safety recheck: 5 s
    endpoint = poll_endpoint("order.created")
    reads = 0
    answer: dict[str, Any] = {}

    def read() -> polling.Page:
        nonlocal reads
        reads += 1
        return polling.feed_read(endpoint=endpoint, limit=10)

    def poll() -> None:
        try:
            answer["page"] = polling.long_poll(read, endpoint_id=endpoint.pk, key="k", wait=20)
            answer["at"] = time.monotonic()
        finally:
            connections.close_all()

    waiter = threading.Thread(target=poll)
    waiter.start()
    wait_until(lambda: reads, timeout=10, what="the first read")
    services.emit("order.created", {"n": 1})  # committed and notified, but hidden
    wait_until(lambda: reads >= 3, timeout=10, what="the waiter reading again soon")
    older.commit()
    ended_at = time.monotonic()
    waiter.join(25)

    assert len(answer["page"].data) == 1
    assert answer["at"] - ended_at < 2.5, "read again within moments, not at the 5 s recheck"
