"""Example domain data. Business uniqueness lives in the database, not in ``if exists``."""

from django.db import models
from django.db.models import Q


class OrderStatus(models.TextChoices):
    PENDING = "pending", "Pending payment"
    PAID = "paid", "Paid"
    REFUNDED = "refunded", "Refunded"


class Order(models.Model):
    reference = models.CharField(max_length=100, unique=True)
    amount = models.PositiveBigIntegerField(help_text="In minor units (cents).")
    currency = models.CharField(max_length=3)
    status = models.CharField(
        max_length=16, choices=OrderStatus.choices, default=OrderStatus.PENDING
    )
    paid_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.reference


class PaymentStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    PROCESSING = "processing", "Processing"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    REFUNDED = "refunded", "Refunded"


class Payment(models.Model):
    """A provider's payment for one of our orders; ``version`` is the provider's."""

    source = models.ForeignKey(
        "receivers.Source", on_delete=models.PROTECT, related_name="payments"
    )
    provider_payment_id = models.CharField(max_length=255)
    order = models.ForeignKey(Order, on_delete=models.PROTECT, related_name="payments")
    amount = models.PositiveBigIntegerField()
    currency = models.CharField(max_length=3)
    status = models.CharField(
        max_length=16, choices=PaymentStatus.choices, default=PaymentStatus.PENDING
    )
    version = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # One provider payment, one local payment, whoever creates it first.
            models.UniqueConstraint(
                fields=["source", "provider_payment_id"], name="payment_unique_provider_id"
            ),
            # An order is paid by at most one payment.
            models.UniqueConstraint(
                fields=["order"],
                condition=Q(status__in=["succeeded", "refunded"]),
                name="payment_one_success_per_order",
            ),
        ]
        indexes = [models.Index(fields=["status", "updated_at"], name="payment_status_idx")]

    def __str__(self) -> str:
        return f"{self.provider_payment_id} ({self.status})"


class PaymentTransition(models.Model):
    """Audit of applied transitions: one row per real change, never one per event."""

    payment = models.ForeignKey(Payment, on_delete=models.CASCADE, related_name="transitions")
    from_status = models.CharField(max_length=16)
    to_status = models.CharField(max_length=16)
    version = models.PositiveBigIntegerField()
    via = models.CharField(max_length=16)  # "webhook" or "reconcile"
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.payment_id}: {self.from_status} -> {self.to_status}"
