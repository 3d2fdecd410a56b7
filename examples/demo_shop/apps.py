from typing import Any

from django.apps import AppConfig


class DemoShopConfig(AppConfig):
    name = "examples.demo_shop"
    # The label of before the move: its tables, migrations and ordering keys stay as they were.
    label = "demo_shop"
    verbose_name = "Demo shop (example product)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from deliveries.bindings import bind_model, bind_signal

        from . import handlers  # noqa: F401  (the demo receiver's inbox handler)
        from .models import Invoice, Order
        from .serializers import invoice_paid_data, order_data
        from .signals import invoice_paid

        bind_model(
            Order,
            created="shop.order.created",
            updated="shop.order.updated",
            deleted="shop.order.deleted",
            serializer=order_data,
        )

        def same_line_as_the_order(invoice: Invoice, **_: Any) -> str:
            # The invoice's events queue behind its order's, for ordered endpoints.
            return f"demo_shop.order:{invoice.order_id}"

        bind_signal(
            invoice_paid,
            "shop.invoice.paid",
            data=lambda invoice, **_: invoice_paid_data(invoice),
            ordering_key=same_line_as_the_order,
        )
