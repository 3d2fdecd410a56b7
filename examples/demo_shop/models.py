"""A tiny shop, the demo product: its changes become webhooks through signal bindings."""

from django.db import models


class OrderStatus(models.TextChoices):
    PLACED = "placed", "Placed"
    PAID = "paid", "Paid"
    SHIPPED = "shipped", "Shipped"


class Order(models.Model):
    customer_email = models.EmailField()
    amount_cents = models.PositiveIntegerField()
    currency = models.CharField(max_length=3, default="EUR")
    status = models.CharField(max_length=16, choices=OrderStatus.choices, default="placed")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"order #{self.pk} ({self.status})"


class Invoice(models.Model):
    order = models.OneToOneField(Order, on_delete=models.CASCADE, related_name="invoice")
    amount_cents = models.PositiveIntegerField()
    currency = models.CharField(max_length=3, default="EUR")
    paid_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"invoice #{self.pk}"
