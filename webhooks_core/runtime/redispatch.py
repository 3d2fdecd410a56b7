"""Dispatching again the rows whose message the broker may have lost (both sides' sweepers)."""

import time
from collections.abc import Callable
from typing import Any

from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone


def redispatch_in_batches(
    queryset: "models.QuerySet[Any]",
    condition: Q,
    *,
    order_by: str,
    dispatch: Callable[[list[Any]], None],
    batch_size: int,
    max_batches: int,
    deadline: float | None = None,
) -> int:
    """Mark matching rows dispatched now (``dispatched_at``) and dispatch their messages, in
    batches.

    Each batch is taken with ``SELECT ... FOR UPDATE SKIP LOCKED`` (a no-op on SQLite), so
    two sweepers never take the same row; its ``dispatched_at`` is set before its messages
    are sent, after commit. Stops after ``max_batches``, at the first short batch, or once
    ``deadline`` (a ``time.monotonic()`` value) has passed. Returns how many rows it sent.
    """
    total = 0
    for _ in range(max_batches):
        with transaction.atomic():
            ids = list(
                queryset.select_for_update(skip_locked=True)
                .filter(condition)
                .order_by(order_by)
                .values_list("pk", flat=True)[:batch_size]
            )
            if not ids:
                break
            queryset.filter(pk__in=ids).update(dispatched_at=timezone.now())
            transaction.on_commit(lambda ids=ids: dispatch(ids), robust=True)  # type: ignore[misc]
        total += len(ids)
        if len(ids) < batch_size or (deadline is not None and time.monotonic() > deadline):
            break
    return total
