"""The process's cap on open requests (deliveries/pipeline/owner/lanes.py): a line, first come
first served, nobody past it, each served all its lanes at once."""

import threading
import warnings
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest
from celery import signals
from celery.app import trace
from celery.concurrency import get_implementation
from celery.exceptions import SecurityWarning
from pytest_django.fixtures import Settings as SettingsWrapper

from deliveries.pipeline.owner import lanes
from webhooks_project.celery import app as celery_app


@pytest.fixture
def cap_of_four(settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # A cap of this test's own (another test's owners may still be giving theirs back).
    monkeypatch.setattr(lanes, "_cap", 0)
    monkeypatch.setattr(lanes, "_free", 0)
    monkeypatch.setattr(lanes, "_line", deque())
    settings.WEBHOOKS_DELIVERY_MAX_OPEN_REQUESTS = 4
    yield
    assert not lanes._line, "a waiter left in line"


def wait_in_thread(wanted: int, timeout: float) -> tuple[threading.Thread, list[int]]:
    got: list[int] = []
    thread = threading.Thread(target=lambda: got.append(lanes.acquire(wanted, timeout)))
    thread.start()
    return thread, got


def until_in_line(count: int) -> None:
    for _ in range(500):
        if len(lanes._line) == count:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"{len(lanes._line)} in line, not {count}")


def test_nobody_takes_a_permit_past_the_line(cap_of_four: None) -> None:
    assert lanes.try_acquire(4) == 4
    thread, got = wait_in_thread(3, timeout=10)
    until_in_line(1)
    lanes.release(1)
    # One is free, but the owner in line waits for three: a newcomer does not get it.
    assert lanes.try_acquire(1) == 0
    lanes.release(1)
    assert lanes.try_acquire(1) == 0
    assert not got
    lanes.release(1)
    thread.join(5)
    assert got == [3]  # all three at once
    assert lanes.try_acquire(1) == 0  # the fourth is still ours
    lanes.release(1 + 3)
    assert lanes.try_acquire(4) == 4
    lanes.release(4)


def two_in_line(
    first_timeout: float,
) -> tuple[threading.Thread, list[int], threading.Thread, list[int]]:
    """Every permit taken; then one waits for four, and one behind it for one."""
    assert lanes.try_acquire(4) == 4
    first, got_first = wait_in_thread(4, timeout=first_timeout)
    until_in_line(1)
    second, got_second = wait_in_thread(1, timeout=10)
    until_in_line(2)
    return first, got_first, second, got_second


def test_the_line_is_served_in_order(cap_of_four: None) -> None:
    first, got_first, second, got_second = two_in_line(first_timeout=10)
    lanes.release(1)
    assert not got_first
    assert not got_second  # it waits behind the first
    lanes.release(3)
    first.join(5)
    assert got_first == [4]
    assert not got_second
    lanes.release(4)
    second.join(5)
    assert got_second == [1]
    lanes.release(1)


def test_a_waiter_that_gives_up_leaves_the_line_to_the_next(cap_of_four: None) -> None:
    impatient, got_impatient, patient, got_patient = two_in_line(first_timeout=0.2)
    lanes.release(1)  # not enough for the head; enough for the one behind it
    impatient.join(5)
    patient.join(5)
    assert got_impatient == [0]
    assert got_patient == [1]
    lanes.release(1 + 3)


def test_a_wish_beyond_the_cap_is_served_the_cap(cap_of_four: None) -> None:
    assert lanes.acquire(10, timeout=1) == 4
    lanes.release(4)


# The default cap (WEBHOOKS_DELIVERY_MAX_OPEN_REQUESTS = 0): the pool of the worker as it
# runs. These build the worker `celery -A webhooks_project worker` builds, without
# starting it, and send what its start sends first.


@pytest.fixture
def no_pool_noted(settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lanes, "_pool_size", None)
    monkeypatch.setattr(lanes, "_pool_name", "")
    settings.WEBHOOKS_DELIVERY_MAX_OPEN_REQUESTS = 0


def cli_worker(concurrency: Any, pool: str = "threads", **options: Any) -> Any:
    """The `Worker` that `celery worker` builds (celery/bin/worker.py): `--pool` as its
    class, `--concurrency` as given, or `worker_concurrency` (None here) without it.
    (`Any`: celery-types declares none of a worker's attributes.)"""
    try:
        with warnings.catch_warnings():
            # "You're running the worker with superuser privileges" (a root test machine)
            warnings.simplefilter("ignore", SecurityWarning)
            return celery_app.Worker(
                hostname="lanes@test",
                concurrency=concurrency,
                pool_cls=get_implementation(pool),
                queues=["lanes.test"],
                quiet=True,
                loglevel="WARNING",
                **options,
            )
    finally:
        # Building it sped up task tracing for a worker of this process; the tests'
        # workers run without that.
        trace.reset_worker_optimizations(celery_app)


def set_up(worker: Any) -> None:
    """What `Worker.on_start` sends before the pool starts (the rest of it installs
    signal handlers, which a test process must keep)."""
    signals.celeryd_after_setup.send(sender=worker.hostname, instance=worker, conf=celery_app.conf)


@pytest.mark.parametrize("concurrency", [None, "auto"], ids=["no --concurrency", "auto"])
def test_the_default_cap_is_the_concurrency_the_worker_resolved(
    no_pool_noted: None, concurrency: Any
) -> None:
    worker = cli_worker(concurrency)
    assert isinstance(worker.concurrency, int)  # the CPU count
    set_up(worker)
    assert lanes.cap() == worker.concurrency


@pytest.mark.parametrize(
    ("concurrency", "options", "cap"),
    [(7, {}, 7), (None, {"autoscale": "6,2"}, 6)],
    ids=["--concurrency 7", "--autoscale 6,2"],
)
def test_the_default_cap_is_the_most_the_pool_runs(
    no_pool_noted: None, concurrency: Any, options: dict[str, Any], cap: int
) -> None:
    set_up(cli_worker(concurrency, **options))
    assert lanes.cap() == cap


def test_the_setting_wins_over_the_pool(no_pool_noted: None, settings: SettingsWrapper) -> None:
    settings.WEBHOOKS_DELIVERY_MAX_OPEN_REQUESTS = 3
    set_up(cli_worker(7))
    assert lanes.cap() == 3


@pytest.mark.parametrize(
    ("pool", "waits_when_idle"), [("threads", False), ("solo", False), ("prefork", True)]
)
@pytest.mark.parametrize("concurrency", [None, "auto"], ids=["no --concurrency", "auto"])
def test_the_pool_is_known_by_its_resolved_class(
    no_pool_noted: None, pool: str, waits_when_idle: bool, concurrency: Any
) -> None:
    worker = cli_worker(concurrency, pool)
    set_up(worker)
    assert lanes._pool_name == worker.pool_cls.__module__
    # An in-process pool with no task message waiting: an owner's turn goes on. A
    # prefork child cannot see the messages waiting, so its owners hand on.
    assert lanes.tasks_wait_for_a_slot() is waits_when_idle


@pytest.mark.parametrize("count", [None, "auto", "lots", 0, -2])
def test_a_count_that_is_no_count_never_raises_and_leaves_the_cap(
    no_pool_noted: None, monkeypatch: pytest.MonkeyPatch, count: Any
) -> None:
    # No resolved worker holds such a count; called directly, as Celery's send would
    # swallow what the handler raised.
    worker = cli_worker(None)
    monkeypatch.setattr(worker, "concurrency", count)
    lanes._note_pool(sender=worker.hostname, instance=worker)
    assert lanes.cap() == lanes.DEFAULT_CAP
    assert "thread" in lanes._pool_name
    monkeypatch.setattr(lanes, "_pool_size", 5)
    lanes._note_pool(sender=worker.hostname, instance=worker)
    assert lanes.cap() == 5


def test_a_sender_that_is_no_worker_changes_nothing_and_never_raises(no_pool_noted: None) -> None:
    lanes._note_pool(sender="celery@elsewhere", instance=None)
    assert lanes.cap() == lanes.DEFAULT_CAP
    assert lanes.tasks_wait_for_a_slot()
