"""The process's cap on open requests (deliveries/services/lanes.py): a line, first come
first served, nobody past it, each served all its lanes at once."""

import threading
from collections import deque
from collections.abc import Iterator

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from deliveries.services import lanes


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
