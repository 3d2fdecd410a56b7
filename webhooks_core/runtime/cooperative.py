"""What a hot path does differently where gevent has patched the process (the `Procfile`'s
delivery worker and web server). No Django here.

- `start_beside(target)`: run `target` beside the caller. Where `threading` is patched, a
  `threading.Thread` is a greenlet wrapped in a thread's bookkeeping (its locks, its
  registration, its excepthook); an owner starts one per request, and a raw greenlet
  gives the same concurrency without the bookkeeping's cost.
  Elsewhere, a daemon thread.
- `readable_now(fileno)`: whether a socket has something to read, or was closed by its
  peer, at this instant. gevent's cooperative `select.poll` builds a waiter and goes
  through its hub even for a zero timeout; the operating system's own poll answers a
  zero timeout without ever blocking, for much less, so it is asked directly.
"""

import select
import sys
import threading
from collections.abc import Callable
from typing import Any


def patched(module: str) -> bool:
    """Whether gevent has patched `module` in this process (never importing gevent where
    nobody did)."""
    monkey = sys.modules.get("gevent.monkey")
    return bool(monkey is not None and monkey.is_module_patched(module))


def start_beside(target: Callable[[], None]) -> None:
    """Run `target` concurrently with the caller, which does not wait for it: `target`
    reports its own outcome and catches its own errors."""
    if patched("threading"):
        import gevent

        gevent.spawn_raw(target)
    else:
        threading.Thread(target=target, daemon=True).start()


def _os_poll() -> Any:
    if patched("select"):
        from gevent import monkey

        return monkey.get_original("select", "poll")
    return select.poll


# Found once (asking gevent for the original costs more than the poll itself); not at
# import, which may come before the patching.
_poll_class: Any = None


def readable_now(fileno: int) -> bool:
    """Whether the file descriptor is readable (data, end of file or an error) now,
    without waiting."""
    global _poll_class
    if not hasattr(select, "poll"):
        # (Windows has no poll: the portable form, as urllib3's own check takes.)
        return bool(select.select([fileno], [], [], 0)[0])
    if _poll_class is None:
        _poll_class = _os_poll()
    poller = _poll_class()
    poller.register(fileno, select.POLLIN)
    return bool(poller.poll(0))
