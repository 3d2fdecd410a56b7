"""An owner's objects are freed when its task ends, by reference counting: an owner works
long enough for the cycle collector to move it to its oldest generation, which the delivery
worker collects rarely (`webhooks_core.runtime.collector`), so an owner left in a reference cycle
stayed in memory, with its rows and its endpoint, long after its task."""

import gc
from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus
from tests.fixtures import make_endpoint
from tests.receiver import Receiver

# Written for events fanned out by the emitting process (no worker runs here).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("inline_fan_out")]


def emit_some(count: int) -> None:
    with transaction.atomic():
        for n in range(count):
            services.emit("order.created", {"n": n})


def cyclic_garbage_of(work: Callable[[], Any]) -> list[str]:
    """The types of ours (`deliveries.`) among the objects `work` left in reference
    cycles (the cycle collector stopped meanwhile)."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        work()
        gc.collect()
        kinds = {f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    return sorted(kind for kind in kinds if kind.startswith("deliveries."))


def test_an_owner_leaves_no_reference_cycle_behind(receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver, max_in_flight=4)
    emit_some(8)
    services.endpoint_work(endpoint_id=endpoint.pk)  # (what a first use builds, not counted)
    emit_some(8)
    sent: list[int] = []
    work = lambda: sent.append(services.endpoint_work(endpoint_id=endpoint.pk).sent)  # noqa: E731
    assert cyclic_garbage_of(work) == []
    assert sent == [8]
    assert set(Delivery.objects.values_list("status", flat=True)) == {DeliveryStatus.SUCCEEDED}
