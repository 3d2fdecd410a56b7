"""Deleting or updating many rows in small batches, each its own short transaction.

One ``DELETE ... WHERE created_at < cutoff`` over millions of rows holds its locks and
bloats the WAL for minutes; batches of a few hundred primary keys keep every transaction
short, so the sending path never waits behind retention. A run stops after a time budget
and the next scheduled run goes on where it stopped.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

DEFAULT_TIME_BUDGET_SECONDS = 20.0


@dataclass
class BatchRun:
    rows: int = 0
    batches: int = 0
    finished: bool = True


def run_in_batches(
    select: Callable[[], QuerySet[Any]],
    apply: Callable[[Sequence[Any]], int],
    *,
    batch_size: int,
    time_budget_seconds: float = DEFAULT_TIME_BUDGET_SECONDS,
) -> BatchRun:
    """Repeat ``apply(pks)`` on the next ``batch_size`` primary keys from ``select()``.

    ``select`` must return an ordered queryset of the rows still to handle (handled rows
    must drop out of it, or the loop never ends); ``apply`` returns how many it changed.
    """
    run = BatchRun()
    deadline = time.monotonic() + time_budget_seconds
    while True:
        with transaction.atomic():
            pks = list(select().values_list("pk", flat=True)[:batch_size])
            if not pks:
                return run
            run.rows += apply(pks)
        run.batches += 1
        if len(pks) < batch_size:
            return run
        if time.monotonic() > deadline:
            run.finished = False
            return run
