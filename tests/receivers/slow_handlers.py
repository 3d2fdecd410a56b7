"""A handler for the SIGKILL test, loaded only by the worker process that test starts
(``RECEIVERS_HANDLER_MODULES``). It notes every start in a file (outside any transaction,
so a killed run leaves its trace), sleeps through its first attempt so the worker can be
killed mid-handler, and makes a deliberately non-idempotent effect: a second committed run
would leave a second row."""

import os
import time
import uuid

from examples.payments.models import Order
from receivers.handlers import inbox_handler
from receivers.models import InboxEvent

EVENT_TYPE = "test.slow"
MARKER_ENV = "SLOW_HANDLER_MARKER"
FIRST_ATTEMPT_SLEEP_SECONDS = 40.0


@inbox_handler(EVENT_TYPE)
def slow(event: InboxEvent) -> None:
    with open(os.environ[MARKER_ENV], "a") as marker:
        marker.write(f"{event.event_id} attempt {event.attempts}\n")
    if event.attempts == 1:
        time.sleep(FIRST_ATTEMPT_SLEEP_SECONDS)
    Order.objects.create(
        reference=f"effect-{event.event_id[:40]}-{uuid.uuid4().hex[:8]}", amount=1, currency="EUR"
    )
