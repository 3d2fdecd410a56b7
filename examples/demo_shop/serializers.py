"""The `data` of the demo shop's events (schemas in webhook_events.py)."""

from datetime import UTC
from typing import Any

from django.utils import timezone

from .models import Invoice, Order


def order_data(order: Order) -> dict[str, Any]:
    return {
        "order_id": order.pk,
        "status": order.status,
        "customer": {"email": order.customer_email},
        "total": {"amount_cents": order.amount_cents, "currency": order.currency},
    }


def invoice_paid_data(invoice: Invoice) -> dict[str, Any]:
    paid_at = (invoice.paid_at or timezone.now()).astimezone(UTC)
    return {
        "invoice_id": invoice.pk,
        "order_id": invoice.order_id,
        "amount_cents": invoice.amount_cents,
        "currency": invoice.currency,
        "paid_at": paid_at.isoformat().replace("+00:00", "Z"),
    }
