"""Dispatch: the processing messages of inbox rows. Only ids travel; the task re-reads the row.

The receiving view does not dispatch itself: ``dispatch_processing_soon`` passes the id of
a committed row to one sender thread per process, which dispatches the ids that arrive
within ``LINGER_SECONDS`` of the first as one message (``process_inbox_events``, at most
``RECEIVERS_DISPATCH_BATCH_SIZE`` ids; a lone id goes as ``process_inbox_event``). Sending
a Celery message is costly (kombu builds a Redis client for each one): under a burst, one
message per accepted webhook was the largest single cost of the view. Dispatching from the
request threads whenever no dispatch was in progress batched little (the dispatching
thread holds the GIL, so the others queue few ids meanwhile); a short linger in a thread
of its own makes batches of several ids at any load.

If the broker refuses a message, or the process dies before the thread sent it, the row is
safe: it was committed with ``dispatched_at`` set, so the sweeper sends it again after
``RECEIVERS_REDISPATCH_GRACE_SECONDS``, exactly as when Redis loses a message. A process that
exits normally (a gunicorn worker restarting) first sends what is queued.
"""

import atexit
import logging
import os
import queue
import threading
import time
from collections.abc import Iterable
from typing import Any
from uuid import UUID

from celery import current_app as celery_app

from receivers import conf
from webhooks_core.runtime.tasking import QUEUE_INBOX

logger = logging.getLogger(__name__)

#: How long the sender thread waits for more ids after the first: a burst then goes out in
#: few messages, and processing starts at most this much later.
LINGER_SECONDS = 0.02
#: How long an exiting process waits for its queued ids to be sent.
EXIT_FLUSH_SECONDS = 5.0
# The tasks, by their registered names: a service dispatches a task's message without
# importing the task module (which imports the services).
PROCESS_TASK = "receivers.tasks.process_inbox_event"
PROCESS_BATCH_TASK = "receivers.tasks.process_inbox_events"
#: The worker's own time limits apply (derived from its RECEIVERS_HANDLER_TIMEOUT_SECONDS),
#: not the sender's: Celery puts a task's limits in the message when the sending process
#: has the task registered, unless told not to.
WORKER_LIMITS: dict[str, Any] = {"time_limit": None, "soft_time_limit": None}


def dispatch_processing(inbox_ids: Iterable[UUID | str], countdown: float | None = None) -> None:
    options: dict[str, Any] = {"queue": QUEUE_INBOX, **WORKER_LIMITS}
    if countdown:
        options["countdown"] = countdown
    with celery_app.producer_or_acquire() as producer:
        for inbox_id in inbox_ids:
            celery_app.send_task(PROCESS_TASK, (str(inbox_id),), producer=producer, **options)


def dispatch_processing_soon(inbox_id: UUID | str) -> None:
    """Have the row processed: its message goes out from the sender thread, batched."""
    _sender.submit(str(inbox_id))


def flush_pending(timeout: float = 5.0) -> bool:
    """Wait until every id submitted so far is dispatched (or refused by the broker)."""
    return _sender.flush(timeout)


def dispatch_batch(inbox_ids: list[str]) -> None:
    if len(inbox_ids) == 1:
        celery_app.send_task(PROCESS_TASK, (inbox_ids[0],), queue=QUEUE_INBOX, **WORKER_LIMITS)
    else:
        celery_app.send_task(PROCESS_BATCH_TASK, (inbox_ids,), queue=QUEUE_INBOX, **WORKER_LIMITS)


class BatchSender:
    """One daemon thread per process that dispatches the ids submitted to it, in batches."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._pid: int | None = None
        self._progress = threading.Condition()
        self._submitted = self._handled = 0

    def submit(self, inbox_id: str) -> None:
        if self._pid != os.getpid():
            self._start()
        with self._progress:
            self._submitted += 1
        self._queue.put(inbox_id)

    def flush(self, timeout: float) -> bool:
        with self._progress:
            target = self._submitted
            return self._progress.wait_for(lambda: self._handled >= target, timeout)

    def _start(self) -> None:
        # Started on first use, and again in a forked child (threads do not survive a fork).
        with self._lock:
            if self._pid == os.getpid():
                return
            self._queue = queue.SimpleQueue()
            self._progress = threading.Condition()
            self._submitted = self._handled = 0
            thread = threading.Thread(
                target=self._run, args=(self._queue,), name="inbox-dispatch", daemon=True
            )
            thread.start()
            if self._pid is None:
                atexit.register(self.flush, EXIT_FLUSH_SECONDS)
            self._pid = os.getpid()

    def _run(self, ids: "queue.SimpleQueue[str]") -> None:
        while True:
            batch = [ids.get()]
            limit = conf.get().dispatch_batch_size
            deadline = time.monotonic() + LINGER_SECONDS
            while len(batch) < limit:
                try:
                    batch.append(ids.get(timeout=max(deadline - time.monotonic(), 0)))
                except queue.Empty:
                    break
            try:
                dispatch_batch(batch)
            except Exception:
                logger.warning(
                    "processing messages not sent; the sweeper will send them",
                    extra={"count": len(batch)},
                    exc_info=True,
                )
            with self._progress:
                self._handled += len(batch)
                self._progress.notify_all()


_sender = BatchSender()
