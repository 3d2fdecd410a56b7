"""Reconciliation against our own sender's HTTP API, served for real on 127.0.0.1."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from deliveries import services as sending
from deliveries.models import ApiToken
from examples.payments import reconcile
from examples.payments.models import Order, OrderStatus, Payment, PaymentStatus, PaymentTransition
from receivers import services
from receivers.reconciliation import dispatch_reconciliations, source_reconcile


@pytest.mark.django_db(transaction=True)
def test_stuck_payment_is_settled_from_the_provider_api(
    live_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconcile, "STALE_AFTER_SECONDS", 0.0)
    _, token = ApiToken.issue("reconciler")
    source, _ = services.source_create(slug="shop", scheme="ours", api_base_url=live_server.url)
    source.api_token = token
    source.save()
    order = Order.objects.create(reference="ord_1", amount=1000, currency="EUR")
    payment = Payment.objects.create(
        source=source, provider_payment_id="pay_1", order=order, amount=1000, currency="EUR"
    )
    Payment.objects.filter(pk=payment.pk).update(updated_at=timezone.now() - timedelta(hours=1))
    # The provider knows more than we do: its webhooks never reached us.
    sending.emit("payment.processing", {"payment_id": "pay_1", "version": 2})
    sending.emit("payment.succeeded", {"payment_id": "pay_1", "version": 3})
    sending.emit("payment.succeeded", {"payment_id": "pay_other", "version": 1})

    result = source_reconcile(source_id=source.pk)

    assert (result.checked, result.changed, result.unknown) == (1, 1, 0)
    payment.refresh_from_db()
    assert (payment.status, payment.version) == (PaymentStatus.SUCCEEDED, 3)
    order.refresh_from_db()
    assert order.status == OrderStatus.PAID
    transition = PaymentTransition.objects.get()
    assert (transition.via, transition.to_status) == ("reconcile", "succeeded")

    # Running it again changes nothing: the same transition service, the same rules.
    assert source_reconcile(source_id=source.pk).checked == 0


@pytest.mark.django_db
def test_only_sources_with_an_api_are_reconciled() -> None:
    services.source_create(slug="no-api", scheme="ours")
    services.source_create(slug="github", scheme="github", secret="s", api_base_url="https://x")
    assert dispatch_reconciliations() == 0
