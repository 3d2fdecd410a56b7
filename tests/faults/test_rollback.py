"""Scenario 5: a rolled-back product transaction sends nothing (0 phantom events).

Events are rows written in the product's own transaction and dispatched on commit, so a
rollback takes the event with it; the events committed around it still go out.
"""

import time

import pytest
from django.db import transaction

from deliveries import services
from deliveries.models import Event
from tests.faults.checks import FAST_POLICY, assert_each_arrived_with_its_id
from tests.receiver import Receiver

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


class ProductFailure(Exception):
    pass


def emit_then_fail(type_: str, count: int = 1) -> None:
    with transaction.atomic():
        for n in range(count):
            services.emit(type_, {"n": n})
        raise ProductFailure("the product's transaction fails after emitting")


def test_rolled_back_transactions_and_savepoints_send_nothing(
    celery_worker: object, receiver: Receiver
) -> None:
    services.endpoint_create(url=receiver.url, event_types=["*"], **FAST_POLICY)
    kept = []
    for round_ in range(20):
        with pytest.raises(ProductFailure):
            emit_then_fail("doomed.transaction", count=3)
        with transaction.atomic():
            with pytest.raises(ProductFailure):
                emit_then_fail("doomed.savepoint")
            kept.append(services.emit("kept.after_savepoint", {"round": round_}))
        kept.append(services.emit("kept.autocommit", {"round": round_}))

    receiver.wait_for(len(kept), timeout=60)
    time.sleep(0.5)  # room for a phantom to arrive, if there were one
    assert_each_arrived_with_its_id([e.id for e in kept], receiver.requests)
    assert not Event.objects.filter(type__startswith="doomed").exists()
    assert Event.objects.count() == len(kept)
