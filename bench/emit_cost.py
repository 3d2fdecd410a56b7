"""`emit()` one event per transaction beside the same transaction writing one plain model
row (scenario `emit-row` of `python -m bench`; ours only).

Ten endpoints at the fast receiver are subscribed. The two kinds of transaction alternate
in rounds in this one process (the product's), so that the machine's load weighs on both
alike; the ratio of their transactions/s is the figure to compare between runs.

The rounds run with our workers stopped: each event becomes ten deliveries, and sending
them on the same 2 cores would measure the machine's sending capacity, not the product's
transaction (in production the workers run in their own processes). The workers then start
and every event must arrive at every endpoint. One more round pair runs with them
delivering, for the ratio on one small machine.
"""

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.ours import OurSystem

EVENT_TYPE = "bench.load"
ENDPOINTS = 10
ROUNDS = 5
TARGET_SHARE = 0.5


@dataclass
class EmitCost:
    transactions: int
    endpoints: int
    plain_rate: float
    emit_rate: float
    arrived: int  # deliveries that arrived once the workers ran
    expected: int  # (transactions and the warm-up's) x endpoints
    delivering_share: float = 0.0  # the ratio of a round pair with the workers delivering

    @property
    def share(self) -> float:
        return self.emit_rate / self.plain_rate if self.plain_rate else 0.0


def emit_cost(system: "OurSystem", receiver: Any, transactions: int) -> EmitCost:
    from django.db import transaction

    from bench.scenarios import wait_arrivals
    from deliveries import services
    from webhooks_project.models import WorkerHeartbeat

    path = "/ours/emit-row"
    paths = [f"{path}/{n}" for n in range(ENDPOINTS)]
    system.subscribe_many([receiver.url + each for each in paths])
    plain_seconds = emit_seconds = 0.0
    ids: set[str] = set()

    def plain(count: int) -> float:
        started = time.perf_counter()
        for _ in range(count):
            with transaction.atomic():
                WorkerHeartbeat.objects.create(hostname=f"bench-row-{uuid.uuid4()}", seen_at=_now())
        return time.perf_counter() - started

    def emitted(count: int) -> float:
        started = time.perf_counter()
        for n in range(count):
            with transaction.atomic():
                ids.add(str(services.emit(EVENT_TYPE, {"n": n}).id))
        return time.perf_counter() - started

    plain(50)  # warm-up: connections, the first fan-out messages
    emitted(50)
    for r in range(ROUNDS):
        share = transactions * (r + 1) // ROUNDS - transactions * r // ROUNDS
        plain_seconds += plain(share)
        emit_seconds += emitted(share)
    with system.worker():
        # Every event at every endpoint (the warm-up's too).
        expected = len(ids) * ENDPOINTS
        arrived = sum(len(wait_arrivals(receiver, each, ids, timeout=300)) for each in paths)
        share = transactions // ROUNDS
        emit_alongside = emitted(share)
        delivering = plain(share) / emit_alongside  # the ratio of their transactions/s
    WorkerHeartbeat.objects.filter(hostname__startswith="bench-row-").delete()
    return EmitCost(
        transactions,
        ENDPOINTS,
        transactions / plain_seconds,
        transactions / emit_seconds,
        arrived,
        expected,
        delivering,
    )


def _now() -> Any:
    from django.utils import timezone

    return timezone.now()
