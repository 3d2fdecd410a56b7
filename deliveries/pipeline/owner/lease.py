"""An owner's lease on its endpoint, held for as long as it works it.

The lease is renewed every third of it (`renew_if_due`, on the owner's own path). Every
wait of the owner's (a lane, the process's permits, a recording, the next due row) ends
by the next renewal; the waits it cannot bound itself (a row lock its recording meets, a
pooled connection's checkout, a resolver) are covered by the guard: a greenlet or thread
beside the owner that cuts its open requests short when a renewal is overdue, a margin
before the lease ends, whatever the owner is blocked on. So no request outlives its claim
and a second owner never sends a row whose first request is still open.
"""

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from uuid import UUID

import redis
from django.db import DatabaseError
from django.utils import timezone

from deliveries.pipeline.owner.claims import next_due_in
from deliveries.pipeline.owner.lease_rows import (
    lease_seconds,
    owner_release,
    owner_renew,
    owner_take,
)
from deliveries.pipeline.wake import wake_book
from webhooks_core.runtime.cooperative import start_beside

logger = logging.getLogger("deliveries.pipeline.owner")


# The longest margin `cut_margin` gives: a long lease needs no more.
MAX_CUT_MARGIN_SECONDS = 5.0


def cut_margin(lease: float) -> float:
    """How long before its lease ends an owner's open requests are cut when it could not
    renew: a sixth of the lease (a renewal is due every third), at most
    `MAX_CUT_MARGIN_SECONDS`."""
    return min(lease / 6, MAX_CUT_MARGIN_SECONDS)


class Lease:
    def __init__(self, endpoint_id: str, token: uuid.UUID, on_overdue: Callable[[], None]):
        self.endpoint_id = endpoint_id
        self.token = token
        self.seconds = lease_seconds()
        self.renew_every = self.seconds / 3
        self.renewed_at = time.monotonic()
        self.lost = False
        self._on_overdue = on_overdue

    def until_renewal(self) -> float:
        """Seconds until the lease is due for renewal: no wait of the owner's outlasts it,
        so a lease is renewed every third of it, give or take one statement."""
        return self.renew_every - (time.monotonic() - self.renewed_at)

    def left(self) -> float:
        """Seconds the lease has left at least (counted from before the renewal's
        statement, which the database dated later)."""
        return self.seconds - (time.monotonic() - self.renewed_at)

    def until_cut(self) -> float:
        """Seconds until the guard cuts the owner's requests unless it renews."""
        return self.left() - cut_margin(self.seconds)

    def expires_at(self) -> datetime:
        return timezone.now() + timedelta(seconds=self.left())

    def taken_back(self, token: uuid.UUID) -> None:
        self.token = token
        self.renewed_at = time.monotonic()

    def renew(self) -> bool:
        """Renew now; False when the lease is no longer ours (or may end before we can
        renew it): the owner then stops, its requests cut."""
        now = time.monotonic()
        try:
            renewed = owner_renew(endpoint_id=self.endpoint_id, token=self.token)
        except DatabaseError:  # tried again at the next round, while the lease lasts
            logger.warning("could not renew the lease of endpoint %s", self.endpoint_id)
            return self.until_cut() > 0
        if renewed:
            self.renewed_at = now
            self.mark_working()
        return renewed

    @contextlib.contextmanager
    def guarded(self) -> Iterator[None]:
        """The guard runs while the owner works (see the module's doc)."""
        stop = threading.Event()

        def guard() -> None:
            try:
                while not stop.wait(max(self.until_cut(), 0.0)):
                    if self.until_cut() <= 0:
                        logger.warning(
                            "endpoint %s: the owner could not renew its lease in time; "
                            "its open requests are cut",
                            self.endpoint_id,
                        )
                        self.lost = True
                        self._on_overdue()
                        return
            except Exception:
                logger.exception("the lease guard of endpoint %s failed", self.endpoint_id)

        start_beside(guard)
        try:
            yield
        finally:
            stop.set()

    def mark_working(self) -> None:
        # On a Redis error wakes dispatch messages that find us working: more, never fewer.
        with contextlib.suppress(redis.RedisError):
            wake_book().working(self.endpoint_id, self.seconds)

    def clear_mark(self) -> None:
        # On a Redis error the mark expires with the lease; the sweeper covers the gap.
        with contextlib.suppress(redis.RedisError):
            wake_book().clear(self.endpoint_id)

    def release(self, hold_seconds: float = 0.0) -> None:
        owner_release(endpoint_id=self.endpoint_id, token=self.token, hold_seconds=hold_seconds)


def hand_back(
    *, endpoint_id: UUID | str, token: uuid.UUID, hold_seconds: float = 0.0
) -> tuple[uuid.UUID | None, float | None]:
    """An owner with nothing left stops: it clears its wake mark (the next wake dispatches
    a message), releases its lease, then looks once more. A row that became due before
    the mark was cleared had its wake folded into our work, so it is seen here: the owner
    takes the lease back and goes on (returns the new token). One that became due after
    has a message of its own; if that message's worker took the lease first, it owns.
    Returns (the new token or None, seconds until the next row falls due or None)."""
    with contextlib.suppress(redis.RedisError):
        # On a Redis error the mark expires with the lease; the sweeper covers the gap.
        wake_book().clear(str(endpoint_id))
    # Two statements, not one: a statement's snapshot is taken before it locks the lease's
    # row, so a look in the release's own statement could miss a row committed between the
    # two, whose wake's worker had found the lease still ours and ended.
    owner_release(endpoint_id=endpoint_id, token=token, hold_seconds=hold_seconds)
    wait = next_due_in(endpoint_id=endpoint_id)
    if wait is None:
        return None, None
    if hold_seconds > 0 or wait > 0:
        return None, max(wait, hold_seconds)
    return owner_take(endpoint_id=endpoint_id), 0.0
