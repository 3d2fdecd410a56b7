"""A handler's run: bounded, and its inbox row's lease renewed while it is within its bound.

Without renewal a handler longer than ``RECEIVERS_LEASE_SECONDS`` lost its row to the
sweeper while it still ran: the row was dispatched and run again beside it, each earlier
run rolled back, the attempt limit never applied, and side effects repeated for ever.

`kept` registers a run with one keeper per process (a thread; a greenlet where gevent has
patched ``threading``), which renews the row's lease every third of it, guarded by the
claim's token, on a database connection of its own. At ``RECEIVERS_HANDLER_TIMEOUT_SECONDS``
it stops renewing and calls the run's ``on_overrun``: the attempt is recorded as failed
(retried with backoff, or ``failed`` once the attempts are spent), which takes the token
off the row. Python cannot stop a thread: the late run goes on until it returns, and its
transaction rolls back because its token no longer holds the row (``LeaseLost``). On
Celery's prefork pool the processing tasks' soft time limit stops it (``task_time_limits``).

One keeper per process rather than a thread per run: most runs end long before their first
renewal is due, and registering one is a push onto a heap.
"""

import heapq
import itertools
import logging
import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from receivers.models import InboxEvent

logger = logging.getLogger(__name__)

#: A batch of rows starts no handler after this long: the rest goes on in a new message,
#: so every handler of a batch has its whole bound before the task's soft time limit.
HAND_ON_AFTER_SECONDS = 5.0
#: Past a handler's bound: room for the claim, the hand-on and the rollback before the
#: soft time limit, then for the soft limit's exception to unwind before the hard one.
SOFT_LIMIT_MARGIN_SECONDS = 10.0
HARD_LIMIT_MARGIN_SECONDS = 30.0
#: However short a (misconfigured) lease, renewals are no busy loop.
MIN_RENEWAL_SECONDS = 0.05


class HandlerTimedOut(Exception):
    """The handler ran past ``RECEIVERS_HANDLER_TIMEOUT_SECONDS``: a failed attempt."""


def task_time_limits(bound_seconds: float) -> tuple[float, float]:
    """The (soft, hard) Celery time limits of a processing task whose handlers have
    ``bound_seconds`` each; prefork applies them, the thread and gevent pools do not."""
    soft = HAND_ON_AFTER_SECONDS + bound_seconds + SOFT_LIMIT_MARGIN_SECONDS
    return soft, soft + HARD_LIMIT_MARGIN_SECONDS


Overrun = Callable[[HandlerTimedOut, str], None]


@dataclass(eq=False)
class _Run:
    inbox_id: uuid.UUID
    token: uuid.UUID
    lease_seconds: float
    bound_seconds: float
    bound_at: float
    on_overrun: Overrun
    runner: int  # the thread running the handler, for its stack at the bound
    done: bool = False

    def next_at(self, now: float) -> float:
        return min(now + max(self.lease_seconds / 3, MIN_RENEWAL_SECONDS), self.bound_at)


@contextmanager
def kept(
    *,
    inbox_id: uuid.UUID,
    token: uuid.UUID,
    lease_seconds: float,
    bound_seconds: float,
    on_overrun: Overrun,
) -> Iterator[None]:
    """Keep the row's lease while the block runs, for ``bound_seconds`` at most; past it,
    ``on_overrun(error, stack)`` is called once, beside the block (which may still run)."""
    now = time.monotonic()
    run = _Run(
        inbox_id=inbox_id,
        token=token,
        lease_seconds=lease_seconds,
        bound_seconds=bound_seconds,
        bound_at=now + bound_seconds,
        on_overrun=on_overrun,
        runner=threading.get_ident(),
    )
    _keeper.watch(run, run.next_at(now))
    try:
        yield
    finally:
        _keeper.forget(run)


class _Keeper:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Run]] = []
        self._condition = threading.Condition()
        self._sequence = itertools.count()
        self._live = 0  # runs registered and not finished
        self._pid = 0

    def watch(self, run: _Run, at: float) -> None:
        with self._condition:
            if self._pid != os.getpid():
                # Started in the process that runs handlers (a forked child gets its own).
                self._heap = []
                self._live = 0
                self._pid = os.getpid()
                threading.Thread(target=self._loop, name="inbox-lease-keeper", daemon=True).start()
            heapq.heappush(self._heap, (at, next(self._sequence), run))
            self._live += 1
            if self._heap[0][2] is run:
                self._condition.notify()

    def forget(self, run: _Run) -> None:
        with self._condition:
            run.done = True
            self._live -= 1
            # A finished run leaves the heap when its time comes up; most runs end long
            # before, so the heap is swept of them once they are most of it.
            if len(self._heap) > 2 * self._live + 64:
                self._heap = [entry for entry in self._heap if not entry[2].done]
                heapq.heapify(self._heap)

    def _next_due(self) -> _Run:
        with self._condition:
            while True:
                # Finished runs leave the heap as they come up, unlooked at.
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._condition.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._condition.wait(wait)
                    continue
                return heapq.heappop(self._heap)[2]

    def _loop(self) -> None:
        while True:
            run = self._next_due()
            try:
                again = self._act(run)
            except Exception:
                # A database that does not answer: tried again at the next third.
                logger.warning("inbox lease keeper: the database did not answer", exc_info=True)
                again = True
            finally:
                # Not held between renewals (under gevent it is a pooled connection).
                connection.close()
            if again:
                with self._condition:
                    if not run.done:
                        at = run.next_at(time.monotonic())
                        heapq.heappush(self._heap, (at, next(self._sequence), run))

    def _act(self, run: _Run) -> bool:
        """Renew the run's lease, or end its attempt at its bound; whether to look again."""
        if time.monotonic() >= run.bound_at:
            with self._condition:
                if run.done:
                    return False
                run.done = True
            error = HandlerTimedOut(
                f"the handler ran past its bound of {run.bound_seconds:g} s "
                "(RECEIVERS_HANDLER_TIMEOUT_SECONDS); the late run is rolled back"
            )
            run.on_overrun(error, _stack_of(run.runner))
            return False
        expires = timezone.now() + timedelta(seconds=run.lease_seconds)
        renewed = InboxEvent.objects.filter(pk=run.inbox_id, lease_token=run.token).update(
            lease_expires_at=expires
        )
        # Nothing renewed: the row is no longer the run's (it was taken over, or an
        # operator's change); its end will find out (`LeaseLost`).
        return bool(renewed)


def _stack_of(thread_ident: int) -> str:
    """Where the handler's thread is at its bound (nothing for a greenlet)."""
    frame = sys._current_frames().get(thread_ident)
    if frame is None:
        return ""
    return "Stack of the handler at its bound:\n" + "".join(traceback.format_stack(frame))


_keeper = _Keeper()


def hand_on_after_seconds() -> float:
    """`HAND_ON_AFTER_SECONDS`, read when asked (a test may change it)."""
    return HAND_ON_AFTER_SECONDS
