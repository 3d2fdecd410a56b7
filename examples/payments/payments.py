"""The one transition service for payments, used by webhook handlers and reconciliation.

Whatever tells us about a payment (a webhook, the provider's API), the state changes by
the same rules here:

1. lock the payment (``entity_lock``): events of one payment apply one at a time;
2. ignore anything not newer than what we have (``versioned_update``): 10 after 11 is a
   no-op;
3. refuse transitions the state machine forbids: an old ``processing`` cannot undo
   ``succeeded``;
4. apply the business effect once: the order is marked paid by a conditional update, and
   the database allows one succeeded payment per order.
"""

import enum
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from receivers.handlers import PermanentFailure
from receivers.idempotency import MissingPredecessor, entity_lock, versioned_update
from receivers.statemachine import InvalidTransition, StateMachine

from .models import Order, OrderStatus, Payment, PaymentStatus, PaymentTransition

PAYMENT_STATES = StateMachine.of(
    {
        PaymentStatus.PENDING: {
            PaymentStatus.PROCESSING,
            PaymentStatus.SUCCEEDED,
            PaymentStatus.FAILED,
        },
        PaymentStatus.PROCESSING: {PaymentStatus.SUCCEEDED, PaymentStatus.FAILED},
        PaymentStatus.SUCCEEDED: {PaymentStatus.REFUNDED},
        PaymentStatus.FAILED: set(),
        PaymentStatus.REFUNDED: set(),
    }
)

#: Event type -> the payment status it reports.
TYPE_TO_STATUS = {
    "payment.created": PaymentStatus.PENDING,
    "payment.processing": PaymentStatus.PROCESSING,
    "payment.succeeded": PaymentStatus.SUCCEEDED,
    "payment.failed": PaymentStatus.FAILED,
    "payment.refunded": PaymentStatus.REFUNDED,
}


class Applied(enum.StrEnum):
    CHANGED = "changed"
    STALE = "stale"  # not newer than what we have
    REPEATED = "repeated"  # newer version, same status: version recorded, nothing else
    REFUSED = "refused"  # the state machine forbids it


@dataclass(frozen=True)
class PaymentFacts:
    provider_payment_id: str
    status: str
    version: int
    amount: int | None = None
    currency: str | None = None
    order_reference: str | None = None


def _lock(source_id: int, provider_payment_id: str) -> None:
    entity_lock("payment", f"{source_id}:{provider_payment_id}")


def _check_amount(facts: PaymentFacts, amount: int, currency: str, what: str) -> None:
    if facts.amount is not None and facts.amount != amount:
        raise PermanentFailure(f"amount {facts.amount} does not match the {what} ({amount})")
    if facts.currency is not None and facts.currency.upper() != currency.upper():
        raise PermanentFailure(f"currency {facts.currency} does not match the {what}")


@transaction.atomic
def payment_register(*, source_id: int, facts: PaymentFacts) -> Payment:
    """Create the local payment for a provider payment, once (idempotent)."""
    _lock(source_id, facts.provider_payment_id)
    existing = Payment.objects.filter(
        source_id=source_id, provider_payment_id=facts.provider_payment_id
    ).first()
    if existing is not None:
        return existing
    if not facts.order_reference:
        raise PermanentFailure("the payment names no order")
    order = Order.objects.filter(reference=facts.order_reference).first()
    if order is None:
        raise PermanentFailure(f"no order {facts.order_reference!r}")
    _check_amount(facts, order.amount, order.currency, "order")
    return Payment.objects.create(
        source_id=source_id,
        provider_payment_id=facts.provider_payment_id,
        order=order,
        amount=order.amount,
        currency=order.currency,
        status=PaymentStatus.PENDING,
        version=0,
    )


@transaction.atomic
def payment_apply_state(*, source_id: int, facts: PaymentFacts, via: str) -> Applied:
    """Move a payment to the state the provider reports, if that is newer and allowed.

    Raises ``MissingPredecessor`` when the payment is not known yet.
    """
    _lock(source_id, facts.provider_payment_id)
    payment = (
        Payment.objects.select_related("order")
        .filter(source_id=source_id, provider_payment_id=facts.provider_payment_id)
        .first()
    )
    if payment is None:
        raise MissingPredecessor(f"payment {facts.provider_payment_id!r} is not known yet")
    _check_amount(facts, payment.amount, payment.currency, "payment")
    if facts.version <= payment.version:
        return Applied.STALE
    same_row = Payment.objects.filter(pk=payment.pk)
    try:
        changes = PAYMENT_STATES.check(payment.status, facts.status)
    except InvalidTransition:
        return Applied.REFUSED
    if not changes:
        versioned_update(same_row, version=facts.version, updated_at=timezone.now())
        return Applied.REPEATED
    if not versioned_update(
        same_row, version=facts.version, status=facts.status, updated_at=timezone.now()
    ):
        return Applied.STALE
    PaymentTransition.objects.create(
        payment=payment,
        from_status=payment.status,
        to_status=facts.status,
        version=facts.version,
        via=via,
    )
    _apply_order_effect(payment.order, facts.status)
    return Applied.CHANGED


def _apply_order_effect(order: Order, status: str) -> None:
    """The business effect, written as a conditional update: doing it twice is a no-op."""
    now = timezone.now()
    if status == PaymentStatus.SUCCEEDED:
        Order.objects.filter(pk=order.pk, status=OrderStatus.PENDING).update(
            status=OrderStatus.PAID, paid_at=now
        )
    elif status == PaymentStatus.REFUNDED:
        Order.objects.filter(pk=order.pk, status=OrderStatus.PAID).update(
            status=OrderStatus.REFUNDED
        )
