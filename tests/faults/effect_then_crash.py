"""A handler for the crash-after-effect scenario, loaded only by the worker process that
test starts (``RECEIVERS_HANDLER_MODULES``).

For one source it stands in front of the example's `payment.succeeded` handler. It makes
the example's business effect in a transaction of its own, as a call to another system
would: committed, whatever happens next. Then it notes what the effect did in a file and,
on the first attempt, stalls so that the test can SIGKILL the worker before the inbox row
is marked processed.
"""

import os
import threading
import time

from django.db import connection, transaction

from examples.payments.handlers import facts_from
from examples.payments.payments import Applied, payment_apply_state
from receivers.handlers import inbox_handler
from receivers.models import InboxEvent

SOURCE_SLUG = "faults-crash-after-effect"
MARKER_ENV = "FAULTS_EFFECT_MARKER"
FIRST_ATTEMPT_STALL_SECONDS = 40.0


@inbox_handler("payment.succeeded", sources=[SOURCE_SLUG])
def succeeded_then_stall(event: InboxEvent) -> None:
    applied = _committed_on_its_own(event)
    with open(os.environ[MARKER_ENV], "a") as marker:
        marker.write(f"attempt {event.attempts}: {applied}\n")
    if event.attempts == 1:
        time.sleep(FIRST_ATTEMPT_STALL_SECONDS)


def _committed_on_its_own(event: InboxEvent) -> Applied:
    # Another thread has its own database connection, so its transaction commits apart
    # from the one the inbox row is marked processed in.
    outcome: list[Applied | BaseException] = []

    def apply() -> None:
        try:
            with transaction.atomic():
                facts = facts_from(event)
                outcome.append(
                    payment_apply_state(source_id=event.source_id, facts=facts, via="webhook")
                )
        except BaseException as exc:
            outcome.append(exc)
        finally:
            connection.close()

    worker = threading.Thread(target=apply)
    worker.start()
    worker.join()
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]
