"""The demo shop's business actions. Each runs in one transaction, so the model change and
the events the bindings emit for it commit (or roll back) together."""

from django.db import transaction
from django.utils import timezone

from .models import Invoice, Order, OrderStatus
from .signals import invoice_paid


@transaction.atomic
def order_place(*, customer_email: str, amount_cents: int, currency: str = "EUR") -> Order:
    order = Order.objects.create(
        customer_email=customer_email, amount_cents=amount_cents, currency=currency
    )
    Invoice.objects.create(order=order, amount_cents=amount_cents, currency=currency)
    return order


@transaction.atomic
def invoice_pay(*, invoice_id: int) -> Invoice:
    invoice = Invoice.objects.select_for_update().select_related("order").get(pk=invoice_id)
    if invoice.paid_at is None:
        invoice.paid_at = timezone.now()
        invoice.save(update_fields=["paid_at"])
        invoice_paid.send(sender=Invoice, invoice=invoice)
        invoice.order.status = OrderStatus.PAID
        invoice.order.save(update_fields=["status", "updated_at"])
    return invoice


@transaction.atomic
def order_ship(*, order_id: int) -> Order:
    order = Order.objects.select_for_update().get(pk=order_id)
    order.status = OrderStatus.SHIPPED
    order.save(update_fields=["status", "updated_at"])
    return order


@transaction.atomic
def order_cancel(*, order_id: int) -> None:
    order = Order.objects.select_for_update().filter(pk=order_id).first()
    if order is not None:
        order.delete()
