"""Handlers loaded only by the worker processes some tests start (``RECEIVERS_HANDLER_MODULES``).

``slow``, for the SIGKILL test: it notes every start in a file (outside any transaction,
so a killed run leaves its trace), sleeps through its first attempt so the worker can be
killed mid-handler, and makes a deliberately non-idempotent effect: a second committed run
would leave a second row.

``overrun``, for the prefork pool's time limit: it sleeps far past any bound a test sets,
and notes in the same file when it starts and when its task's soft time limit stops it.
"""

import os
import time
import uuid

from celery.exceptions import SoftTimeLimitExceeded

from examples.payments.models import Order
from receivers.handlers import inbox_handler
from receivers.models import InboxEvent

EVENT_TYPE = "test.slow"
MARKER_ENV = "SLOW_HANDLER_MARKER"
FIRST_ATTEMPT_SLEEP_SECONDS = 40.0
OVERRUN_TYPE = "test.overrun"
OVERRUN_SLEEP_SECONDS = 120.0


@inbox_handler(EVENT_TYPE)
def slow(event: InboxEvent) -> None:
    with open(os.environ[MARKER_ENV], "a") as marker:
        marker.write(f"{event.event_id} attempt {event.attempts}\n")
    if event.attempts == 1:
        time.sleep(FIRST_ATTEMPT_SLEEP_SECONDS)
    Order.objects.create(
        reference=f"effect-{event.event_id[:40]}-{uuid.uuid4().hex[:8]}", amount=1, currency="EUR"
    )


def _note(event: InboxEvent, what: str) -> None:
    with open(os.environ[MARKER_ENV], "a") as marker:
        marker.write(f"{event.event_id} {what}\n")


@inbox_handler(OVERRUN_TYPE)
def overrun(event: InboxEvent) -> None:
    _note(event, "started")
    try:
        time.sleep(OVERRUN_SLEEP_SECONDS)
    except SoftTimeLimitExceeded:
        _note(event, "stopped")
        raise
