"""The process's cap on open requests (`WEBHOOKS_DELIVERY_MAX_OPEN_REQUESTS`).

Every owner working in this process takes one permit per request it opens and gives it
back when the request ends, so hundreds of busy endpoints never open more sockets than
the cap. When owners wait, they wait in line (first come, first served) and nobody takes
a free permit past them, so the endpoints with work share the cap fairly: each in turn.
The one at the head of the line is served when as many permits are free as it has free
lanes, all at once, so that its round claims and records them together rather than one
statement set per request.
"""

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from celery import signals
from celery.worker import state as worker_state

from deliveries import conf

# The cap when neither the setting nor a worker's pool says one: a process that is no
# `celery worker` (a shell, a test calling the services directly, the worker that
# `manage.py serve` and the tests start in their own process, which sends no
# `celeryd_after_setup`).
DEFAULT_CAP = 1000

_pool_size: int | None = None
_pool_name = ""
# Pools whose tasks run in the worker's own process, whose state then shows the task
# messages it took that wait for a free slot (a prefork child cannot see them).
# (Names as `--pool` takes them, and the modules of their classes.)
IN_PROCESS_POOLS = ("gevent", "eventlet", "thread", "solo")
_lock = threading.Lock()
_cap = 0
_free = 0


@dataclass(eq=False)
class _Waiter:
    wanted: int
    granted: int = 0
    served: threading.Event = field(default_factory=threading.Event)


_line: deque[_Waiter] = deque()


@signals.celeryd_after_setup.connect
def _note_pool(sender: Any = None, instance: Any = None, **_: Any) -> None:
    """Record the pool of the `celery worker` this process runs, as the worker resolved it.

    Not `celeryd_init`: it comes before the worker resolves anything, with the command
    line's values (None without `--concurrency`, the string "auto"). This one comes once
    the count is final (the CPU count without `--concurrency`, "auto" sized) and before
    the pool starts, so prefork children inherit what is recorded here. Celery only logs a
    handler's exception, and whatever the handler had still to record is lost (the pool
    name was, after `int("auto")`): so nothing here raises, and a count that is not a
    positive number leaves the cap as it was.
    """
    global _pool_size, _pool_name
    # With --autoscale the pool grows to max_concurrency (None without it).
    size = getattr(instance, "max_concurrency", None) or getattr(instance, "concurrency", None)
    if isinstance(size, int) and size > 0:
        _pool_size = size
    pool = getattr(instance, "pool_cls", None) or ""
    _pool_name = str(pool if isinstance(pool, str) else getattr(pool, "__module__", "")).lower()


def tasks_wait_for_a_slot() -> bool:
    """Whether a task message this worker took waits for a free slot of its pool (True
    when it cannot tell: a prefork child, a process that is no worker)."""
    if not any(name in _pool_name for name in IN_PROCESS_POOLS):
        return True
    return len(worker_state.reserved_requests) > len(worker_state.active_requests)


def cap() -> int:
    return conf.get().max_open_requests or _pool_size or DEFAULT_CAP


def _resize() -> None:
    """Follow the setting (tests change it); called with the lock held."""
    global _cap, _free
    wanted = cap()
    if wanted != _cap:
        _free += wanted - _cap
        _cap = wanted


def try_acquire(wanted: int) -> int:
    """Take up to `wanted` permits without waiting (none while others wait in line);
    returns how many."""
    global _free
    with _lock:
        _resize()
        if _line:
            return 0
        taken = max(0, min(wanted, _free))
        _free -= taken
        return taken


def acquire(wanted: int, timeout: float) -> int:
    """Wait in line up to `timeout` for `wanted` permits (at most the cap), granted all
    at once; returns how many (0 when the wait timed out)."""
    with _lock:
        _resize()
        waiter = _Waiter(max(1, min(wanted, _cap)))
        _line.append(waiter)
        _serve()  # served at once when nobody waits ahead and enough are free
    waiter.served.wait(timeout)
    with _lock:
        if not waiter.granted:
            _line.remove(waiter)
            _serve()  # the one behind may want fewer than were kept for us
        return waiter.granted


def _serve() -> None:
    """Grant the head of the line its permits while enough are free; lock held."""
    global _free
    while _line and _free >= _line[0].wanted:
        waiter = _line.popleft()
        _free -= waiter.wanted
        waiter.granted = waiter.wanted
        waiter.served.set()


def release(count: int) -> None:
    global _free
    if count <= 0:
        return
    with _lock:
        _free += count
        _serve()


def open_requests() -> int:
    with _lock:
        return _cap - _free


class Permits:
    """The permits one round holds: each request it starts hands one to its lane (which
    gives it back when the request ends); whatever is left goes back when the round
    leaves its `with` block, however it leaves it (an error while claiming or preparing
    the round's credentials included), so no path keeps a permit for ever."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __enter__(self) -> "Permits":
        return self

    def __exit__(self, *_: object) -> None:
        self.give_back(self.count)

    def hand_to_lane(self) -> None:
        """One permit now belongs to a request's lane (it releases it when it ends)."""
        self.count -= 1

    def give_back(self, count: int) -> None:
        count = min(count, self.count)
        self.count -= count
        release(count)
