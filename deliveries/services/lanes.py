"""The process's cap on open requests (`WEBHOOKS_DELIVERY_MAX_OPEN_REQUESTS`).

Every owner working in this process takes one permit per request it opens and gives it
back when the request ends, so hundreds of busy endpoints never open more sockets than
the cap; an owner with nothing open that finds every permit taken waits in line for one
(first come, first served), so the endpoints with work share the cap fairly.
"""

import threading
from typing import Any

from celery import signals
from celery.worker import state as worker_state

from .. import conf

# The cap when neither the setting nor a worker's pool says one (a test calling the
# services directly, a shell).
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
_freed = threading.Condition(_lock)


@signals.celeryd_init.connect
def _note_pool_size(sender: Any = None, conf: Any = None, options: Any = None, **_: Any) -> None:
    global _pool_size, _pool_name
    options = options or {}
    concurrency = options.get("concurrency") or getattr(conf, "worker_concurrency", None)
    if concurrency:
        _pool_size = int(concurrency)
    pool = options.get("pool_cls") or options.get("pool") or getattr(conf, "worker_pool", "")
    _pool_name = (pool if isinstance(pool, str) else getattr(pool, "__module__", "")).lower()


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
    """Take up to `wanted` permits without waiting; returns how many."""
    global _free
    with _lock:
        _resize()
        taken = max(0, min(wanted, _free))
        _free -= taken
        return taken


def acquire_one(timeout: float) -> int:
    """Wait up to `timeout` for one permit; returns 1 or 0."""
    global _free
    with _freed:
        _resize()
        if _free <= 0:
            _freed.wait_for(lambda: _free > 0, timeout=timeout)
        if _free <= 0:
            return 0
        _free -= 1
        return 1


def release(count: int) -> None:
    global _free
    if count <= 0:
        return
    with _freed:
        _free += count
        _freed.notify(count)


def open_requests() -> int:
    with _lock:
        return _cap - _free
