from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from . import services
from .models import Invoice, Order


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin[Order]):
    list_display = ["id", "customer_email", "amount_cents", "currency", "status", "created_at"]
    list_filter = ["status"]
    actions = ["ship"]

    @admin.action(description="Ship (emits shop.order.updated)", permissions=["change"])
    def ship(self, request: HttpRequest, queryset: QuerySet[Order]) -> None:
        for order in queryset:
            services.order_ship(order_id=order.pk)
        self.message_user(request, f"{queryset.count()} order(s) shipped.", messages.SUCCESS)


@admin.register(Invoice)
class InvoiceAdmin(admin.ModelAdmin[Invoice]):
    list_display = ["id", "order", "amount_cents", "currency", "paid_at"]
    actions = ["pay"]

    @admin.action(description="Pay (emits shop.invoice.paid)", permissions=["change"])
    def pay(self, request: HttpRequest, queryset: QuerySet[Invoice]) -> None:
        for invoice in queryset:
            services.invoice_pay(invoice_id=invoice.pk)
        self.message_user(request, f"{queryset.count()} invoice(s) paid.", messages.SUCCESS)
