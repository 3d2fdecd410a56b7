"""`emit()` one event per transaction beside the same transaction writing one plain model
row (scenario `emit-row` of `python -m bench`; ours only).

Ten endpoints at the fast receiver are subscribed and our worker runs, so every event is
fanned out after its commit, its endpoints woken and its deliveries sent, as in
production. The two kinds of transaction alternate in rounds in this one process (the
product's), so that the machine's load weighs on both alike; the ratio of their
transactions/s is the figure to compare between runs.
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
    arrived: int  # deliveries that arrived, of transactions x endpoints (and the warm-up's)

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

    with system.worker():
        plain(50)  # warm-up: connections, the first wakes
        emitted(50)
        for r in range(ROUNDS):
            share = transactions * (r + 1) // ROUNDS - transactions * r // ROUNDS
            plain_seconds += plain(share)
            emit_seconds += emitted(share)
        # Every event at every endpoint (the warm-up's too).
        arrived = sum(len(wait_arrivals(receiver, each, ids, timeout=300)) for each in paths)
    WorkerHeartbeat.objects.filter(hostname__startswith="bench-row-").delete()
    return EmitCost(
        transactions,
        ENDPOINTS,
        transactions / plain_seconds,
        transactions / emit_seconds,
        arrived,
    )


def _now() -> Any:
    from django.utils import timezone

    return timezone.now()
