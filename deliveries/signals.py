"""Django signals the sending side publishes, for your code to extend it.

Every signal is sent after the transaction that caused it has committed, so a receiver
never sees something that is rolled back later. Receivers run in the process that made
the change (emit: your web or task process; deliveries: the Celery worker), are called
with ``send_robust`` (a failing receiver is logged and cannot break delivery) and should
be quick: hand slow work to a task.

- ``event_emitted(sender=Event, event=Event)``: an event was recorded by ``emit`` (not
  sent for an idempotent repeat that returned the existing event).
- ``delivery_succeeded(sender=Delivery, delivery=Delivery)``: the endpoint answered 2xx.
- ``delivery_dead_lettered(sender=Delivery, delivery=Delivery)``: no more automatic
  attempts; ``delivery.last_status_code`` and ``delivery.last_error`` say why.
- ``endpoint_suspended(sender=Endpoint, endpoint=Endpoint, reason=str)``: an endpoint was
  suspended automatically (repeated failures, or 410 Gone). Connect receivers in your
  AppConfig.ready().

The ``delivery`` is read after the commit: its ``status``, ``attempts`` and
``completed_at`` are the final ones; ``delivery.event`` and ``delivery.endpoint`` are
loaded with it.
"""

import logging
from typing import TYPE_CHECKING

from django.db import transaction
from django.dispatch import Signal

if TYPE_CHECKING:
    from deliveries.models import Event

logger = logging.getLogger(__name__)

event_emitted = Signal()
delivery_succeeded = Signal()
delivery_dead_lettered = Signal()
endpoint_suspended = Signal()


def send_logged(signal: Signal, sender: type, **kwargs: object) -> None:
    for receiver, result in signal.send_robust(sender=sender, **kwargs):
        if isinstance(result, Exception):
            logger.error(
                "signal receiver %r failed", receiver, exc_info=(type(result), result, None)
            )


def announce_event_emitted(event: "Event") -> None:
    """Send ``event_emitted`` once the current transaction commits (only when listened to)."""
    from deliveries.models import Event

    if event_emitted.has_listeners(Event):
        transaction.on_commit(lambda: send_logged(event_emitted, Event, event=event))
