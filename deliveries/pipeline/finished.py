"""What follows a delivery's final outcome, once it is committed: our signals are sent.
(The next delivery of its ordering key needs no message: the endpoint's owner, which
recorded this outcome, claims the key's new head in its next round.)"""

from django.db import transaction

from deliveries.models import Delivery
from deliveries.pipeline.owner.outcomes import DeliveryOutcome
from deliveries.signals import delivery_dead_lettered, delivery_succeeded, send_logged


def on_delivery_outcome(delivery: Delivery, outcome: str) -> None:
    """Call inside the transaction that recorded ``outcome`` for ``delivery``."""
    if outcome not in (DeliveryOutcome.SUCCEEDED, DeliveryOutcome.DEAD_LETTERED):
        return  # a retry keeps its key's line waiting
    signal = delivery_succeeded if outcome == DeliveryOutcome.SUCCEEDED else delivery_dead_lettered
    if not signal.has_listeners(Delivery):
        return  # nothing to do after commit (the common case, on the hot path)
    delivery_id = delivery.pk

    def after_commit() -> None:
        if signal.has_listeners(Delivery):
            fresh = Delivery.objects.select_related("event", "endpoint").get(pk=delivery_id)
            send_logged(signal, Delivery, delivery=fresh)

    transaction.on_commit(after_commit, robust=True)
