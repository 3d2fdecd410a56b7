"""A long poll after a notice whose message is not visible yet (an older transaction on
the database server still running): it keeps reading soon, backing off to a second, and
does not fall back to the slow safety recheck. When nothing is hidden (another member of
a consumer group read the notice's rows first) it waits for the next notice."""

import threading
import time
import uuid
from typing import Any

import pytest

from deliveries.polling import feed, services, waiters
from tests.conftest import wait_until

pytestmark = pytest.mark.fast


def test_after_a_notice_the_rechecks_start_soon_and_back_off_to_a_second() -> None:
    intervals = [waiters.recheck_interval(reads_since_notice=n) for n in range(8)]
    assert intervals == [0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0]


def test_without_a_notice_a_listening_waiter_reads_again_rarely(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(waiters._hub, "listening", True)
    assert waiters.recheck_interval(reads_since_notice=None) == waiters.SAFETY_RECHECK_SECONDS


def test_a_message_visible_after_its_notice_is_read_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiters._hub, "listening", True)  # the safety recheck: 5 s
    monkeypatch.setattr(services, "_release_connection", lambda: None)
    endpoint_id = uuid.uuid4()
    visible_at: list[float] = []
    monkeypatch.setattr(
        feed, "rows_hidden", lambda _: bool(visible_at) and time.monotonic() < visible_at[0]
    )
    reads: list[float] = []

    def read() -> Any:
        reads.append(time.monotonic())
        data = [{"id": "message"}] if visible_at and time.monotonic() >= visible_at[0] else []
        return services.Page(data=data, iterator="it", done=not data)

    answer: dict[str, Any] = {}

    def poll() -> None:
        answer["page"] = services.long_poll(read, endpoint_id=endpoint_id, key="k", wait=8)
        answer["at"] = time.monotonic()

    waiter = threading.Thread(target=poll)
    waiter.start()
    while not reads:
        time.sleep(0.01)
    # The notice comes now; the message becomes visible 1.5 s later (its transaction's
    # older neighbours ended), with no second notice.
    visible_at.append(time.monotonic() + 1.5)
    waiters.notify([endpoint_id])
    waiter.join(10)

    assert answer["page"].data == [{"id": "message"}]
    # Read within the back-off's second of becoming visible, not at the 5 s safety recheck.
    assert answer["at"] - visible_at[0] < 1.5


def test_after_a_notice_that_finds_nothing_hidden_the_waiter_waits_for_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(waiters._hub, "listening", True)
    monkeypatch.setattr(services, "_release_connection", lambda: None)
    monkeypatch.setattr(feed, "rows_hidden", lambda _: False)
    asked: list[int | None] = []
    real_interval = waiters.recheck_interval

    def interval(*, reads_since_notice: int | None) -> float:
        asked.append(reads_since_notice)
        return real_interval(reads_since_notice=reads_since_notice)

    monkeypatch.setattr(waiters, "recheck_interval", interval)
    endpoint_id = uuid.uuid4()

    def read() -> Any:
        return services.Page(data=[], iterator="it", done=True)

    waiter = threading.Thread(
        target=lambda: services.long_poll(read, endpoint_id=endpoint_id, key="k", wait=2)
    )
    waiter.start()
    wait_until(lambda: asked, timeout=10, what="the first read")
    waiters.notify([endpoint_id])  # its rows were read by another member first
    waiter.join(5)

    # After the notice's read: the safety recheck's interval (None), never a quick one.
    assert len(asked) >= 2
    assert set(asked) == {None}
