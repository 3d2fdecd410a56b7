"""Webhook handlers of the example domain (registered via ``RECEIVERS_HANDLER_MODULES``).

Events carry ``data = {"payment_id", "order", "amount", "currency", "version"}`` where
``version`` is the provider's version of the payment (not the envelope's schema version).
``payment.created`` registers the payment; the status events move it through
``payment_apply_state``. A status event that arrives before ``payment.created`` raises
``MissingPredecessor`` and is retried later (the predecessor usually arrives meanwhile;
reconciliation fetches the truth otherwise).
"""

from typing import Any

from receivers.handlers import PermanentFailure, inbox_handler
from receivers.models import InboxEvent

from . import reconcile  # noqa: F401  (registers the example's reconciler too)
from .payments import TYPE_TO_STATUS, PaymentFacts, payment_apply_state, payment_register


def facts_from(event: InboxEvent) -> PaymentFacts:
    payload = event.payload if isinstance(event.payload, dict) else {}
    data: Any = payload.get("data")
    if not isinstance(data, dict):
        raise PermanentFailure("the event has no 'data' object")
    payment_id = data.get("payment_id")
    if not isinstance(payment_id, str) or not payment_id:
        raise PermanentFailure("data.payment_id is missing")
    version = data.get("version", 0)
    amount = data.get("amount")
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise PermanentFailure("data.version must be a non-negative integer")
    if amount is not None and (isinstance(amount, bool) or not isinstance(amount, int)):
        raise PermanentFailure("data.amount must be an integer (minor units)")
    currency = data.get("currency")
    order = data.get("order")
    return PaymentFacts(
        provider_payment_id=payment_id,
        status=TYPE_TO_STATUS[event.type],
        version=version,
        amount=amount,
        currency=currency if isinstance(currency, str) else None,
        order_reference=order if isinstance(order, str) else None,
    )


@inbox_handler("payment.created")
def payment_created(event: InboxEvent) -> None:
    facts = facts_from(event)
    payment_register(source_id=event.source_id, facts=facts)
    if facts.version:
        payment_apply_state(source_id=event.source_id, facts=facts, via="webhook")


@inbox_handler("payment.processing", "payment.succeeded", "payment.failed", "payment.refunded")
def payment_status_changed(event: InboxEvent) -> None:
    payment_apply_state(source_id=event.source_id, facts=facts_from(event), via="webhook")
