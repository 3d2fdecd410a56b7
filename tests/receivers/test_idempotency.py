import pytest
from django.db import transaction

from examples.payments.models import Order
from receivers.idempotency import entity_lock, lock_key, versioned_update


def test_lock_key_is_stable_signed_64_bit_and_separates_kinds() -> None:
    key = lock_key("payment", "pay_1")
    assert key == lock_key("payment", "pay_1")
    assert -(2**63) <= key < 2**63
    assert key != lock_key("order", "pay_1")


def test_entity_lock_outside_a_transaction_is_a_programming_error() -> None:
    with pytest.raises(RuntimeError, match="atomic"):
        entity_lock("payment", "pay_1")


@pytest.mark.django_db
def test_entity_lock_inside_a_transaction() -> None:
    with transaction.atomic():
        entity_lock("payment", "pay_1")
        entity_lock("payment", "pay_1")  # re-entrant within one transaction


@pytest.mark.django_db
def test_versioned_update_applies_only_newer_versions() -> None:
    order = Order.objects.create(reference="o1", amount=100, currency="EUR")
    rows = Order.objects.filter(pk=order.pk)
    # Orders have no version field; use amount as one, which is what the helper allows.
    assert versioned_update(rows, version=200, version_field="amount", currency="USD")
    assert not versioned_update(rows, version=150, version_field="amount", currency="GBP")
    order.refresh_from_db()
    assert (order.amount, order.currency) == (200, "USD")
