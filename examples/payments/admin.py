from django.contrib import admin
from django.http import HttpRequest

from .models import Order, Payment, PaymentTransition


class PaymentTransitionInline(admin.TabularInline[PaymentTransition, Payment]):
    model = PaymentTransition
    extra = 0
    can_delete = False
    readonly_fields = ["from_status", "to_status", "version", "via", "created_at"]

    def has_add_permission(self, request: HttpRequest, obj: Payment | None = None) -> bool:
        return False


@admin.register(Payment)
class PaymentAdmin(admin.ModelAdmin[Payment]):
    list_display = ["provider_payment_id", "order", "status", "version", "amount", "currency"]
    list_filter = ["status", "source"]
    search_fields = ["provider_payment_id", "order__reference"]
    readonly_fields = [f.name for f in Payment._meta.fields]
    inlines = [PaymentTransitionInline]


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin[Order]):
    list_display = ["reference", "amount", "currency", "status", "paid_at"]
    list_filter = ["status"]
    search_fields = ["reference"]
