"""The sending engine's owner: the one worker that sends an endpoint's requests for now.

A task message says only "endpoint E has work" (`endpoint_work`). Its worker takes E's
lease or ends; the owner works E in rounds until nothing is due (`work`), its lease
renewed and guarded (`lease`), the endpoint read once per version (`endpoint_view`), its
requests each in a lane (`requests`), their results recorded (`writing`, `results`), and
a stopped endpoint's rows settled (`settling`). See the design page for the protocol.
"""

import logging
from uuid import UUID

from deliveries import metrics
from deliveries.models import Delivery, DeliveryStatus
from deliveries.pipeline.owner.lease import hand_back
from deliveries.pipeline.owner.lease_rows import held_for, owner_take
from deliveries.pipeline.owner.outcomes import DeliveryOutcome
from deliveries.pipeline.owner.settling import settle_inactive_endpoints
from deliveries.pipeline.owner.work import Owner, WorkResult
from deliveries.pipeline.owner.writing import RecordingTimedOut
from deliveries.pipeline.wake import wake_after_hold
from webhooks_core import conf as core_conf

logger = logging.getLogger(__name__)

__all__ = [
    "WorkResult",
    "endpoint_work",
    "endpoint_work_for_delivery",
    "hand_back",
    "settle_inactive_endpoints",
]


def endpoint_work(*, endpoint_id: UUID | str, watch: int | None = None) -> WorkResult:
    """Own the endpoint and send what is due until nothing is (see the module's doc)."""
    token = owner_take(endpoint_id=endpoint_id)
    if token is None:
        _wake_after_hold(str(endpoint_id))
        return WorkResult(watch=watch)
    metrics.owners_working.inc()
    owner = Owner(str(endpoint_id), token, WorkResult(owned=True, watch=watch))
    try:
        with owner.lease.guarded():
            owner.run()
    except RecordingTimedOut:
        # A recording that outlasts what the lease allows (the database overloaded or
        # locked): the owner stops as if its lease were lost. Not the task's error: the
        # rows stay claimed until their lease ends, then the next owner takes them.
        logger.warning("endpoint %s: a recording outlasted the lease; stopped", endpoint_id)
        owner.abort()
    except BaseException:
        # A time limit, a shutdown, a database error: no request of ours goes on
        # unrecorded behind us. Cut the open ones short, record what they came to if the
        # database lets us, and give the endpoint back (else its lease runs out).
        owner.abort()
        raise
    finally:
        metrics.owners_working.dec()
        metrics.deliveries_per_wake.observe(owner.result.sent)
    return owner.result


def _wake_after_hold(endpoint_id: str) -> None:
    """A wake that found the endpoint held (an open circuit, a rate limit) comes back when
    the hold ends, and the wakes until then are folded into it (`wake_after_hold`)."""
    held = held_for(endpoint_id=endpoint_id)
    if held is None or held > core_conf.scheduling().max_countdown_seconds:
        return  # not held (another owner works it), or for longer than the sweeper's
    wake_after_hold(endpoint_id, held)


def endpoint_work_for_delivery(*, delivery_id: int) -> str:
    """Work the delivery's endpoint now, in this thread (a shell's or a test's synchronous
    path); returns that delivery's outcome (a `DeliveryOutcome` string)."""
    endpoint_id = (
        Delivery.objects.filter(pk=delivery_id).values_list("endpoint_id", flat=True).first()
    )
    if endpoint_id is None:
        return DeliveryOutcome.NOT_CLAIMED
    result = endpoint_work(endpoint_id=endpoint_id, watch=delivery_id)
    if delivery_id in result.outcomes:
        return result.outcomes[delivery_id]
    status = Delivery.objects.filter(pk=delivery_id).values_list("status", flat=True).first()
    return DeliveryOutcome.HELD if status == DeliveryStatus.HELD else DeliveryOutcome.NOT_CLAIMED
