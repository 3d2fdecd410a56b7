"""Leased jobs: rows a worker claims for a while (``Delivery``, ``InboxEvent``).

A row is claimable when it waits and is due, or when it is busy but its lease ran out (its
worker died); claiming sets a fresh token, so only the claimant's updates (``WHERE
lease_token = <token>``) land. ``dispatched_at`` says when a task message was last sent, so
the sweepers re-send only rows whose message may be lost.
"""

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import models
from django.db.models import F, Q


class LeasedJob(models.Model):
    """The columns of a leased job; abstract (each app's table keeps its own columns)."""

    attempts = models.PositiveIntegerField(default=0)
    # A manual retry starts a fresh retry cycle: the limit counts attempts since then.
    attempts_before_cycle = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # When a task message was last sent for this row; NULL means none is out, so the
    # sweeper dispatches the row as soon as it is due.
    dispatched_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_token = models.UUIDField(null=True, blank=True, editable=False)

    class Meta:
        abstract = True


def claimable(*, waiting: Sequence[str], busy: str, now: datetime) -> Q:
    """Due and waiting, or busy with an expired lease."""
    return Q(status__in=list(waiting), next_attempt_at__lte=now) | Q(
        status=busy, lease_expires_at__lt=now
    )


def lease(*, busy: str, now: datetime, seconds: float) -> tuple[uuid.UUID, dict[str, Any]]:
    """A new claim token and the fields that take a row for ``seconds``."""
    token = uuid.uuid4()
    return token, {
        "status": busy,
        "lease_token": token,
        "lease_expires_at": now + timedelta(seconds=seconds),
        "attempts": F("attempts") + 1,
        "updated_at": now,
    }


def released() -> dict[str, Any]:
    """The fields that give a claimed row's lease back."""
    return {"lease_token": None, "lease_expires_at": None}
