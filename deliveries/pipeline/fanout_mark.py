"""The fan-out's mark: one fan-out message out for the events committed one by one.

A product that emits one event per transaction would otherwise send a message per event
and have its fan-out done one event per transaction. Instead, a commit that finds a
fan-out message already out (the mark) sends none. That message's task fans out every
event waiting and stays on while more keep coming (`fanout._stay_on`); before it stops it
clears the mark and looks once more, so an event whose commit found the mark set is seen
by that last look (its commit came before the clear). A commit after the clear sets the
mark again and sends the next message. Under a steady stream one task takes the events
committed while its last transaction ran, in one transaction.

Like the wake marks, the mark only saves messages: it expires (a lost message is
forgotten), a Redis error dispatches anyway, and the sweeper fans out any event still
waiting after `WEBHOOKS_FANOUT_GRACE_SECONDS`.
"""

import contextlib
from collections.abc import Collection
from datetime import datetime, timedelta
from uuid import UUID

import redis
from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

from deliveries import conf
from deliveries.pipeline.messages import dispatch_fan_outs
from deliveries.pipeline.wake import wake_book

# A commit of at most this many events relies on a fan-out message already out; a larger
# one sends its own, so that large transactions are fanned out side by side, by as many
# tasks as the workers run.
SHARED_MAX_EVENTS = 20
# Longer than a fan-out task stays on (`fanout.STAY_ON_SECONDS`) after a usual wait in the
# queue. A mark outliving its message (lost, or its clear failed) keeps commits from
# dispatching for at most this long; what they committed meanwhile is fanned out by the
# next message after it, or by the sweeper.
MARK_SECONDS = 10.0


def dispatch(event_ids: Collection[UUID | str], *, inserted_at: datetime | None = None) -> None:
    """After a commit: see that these events are fanned out, by a message of their own
    unless one already out will find them. Always their own: more than
    `SHARED_MAX_EVENTS`, events inserted long before the commit (a task's looks cover
    only the last `WEBHOOKS_FANOUT_GRACE_SECONDS`), and no Redis for the marks (each
    process would keep its own)."""
    if len(event_ids) <= SHARED_MAX_EVENTS and _looks_will_see(inserted_at):
        try:
            if not wake_book().mark_fan_out(_name(), MARK_SECONDS):
                return
        except redis.RedisError:
            pass  # dispatch: the mark only saves messages
    try:
        dispatch_fan_outs(event_ids)
    except Exception:
        clear()  # no message went: the next commit must not count on one
        raise


def clear() -> None:
    """A fan-out is about to look at the waiting events for the last time: a commit from
    now on dispatches."""
    # On an error the mark expires; the sweeper fans out what waited meanwhile.
    if conf.counters().redis_url:
        with contextlib.suppress(redis.RedisError):
            wake_book().clear_fan_out(_name())


def _looks_will_see(inserted_at: datetime | None) -> bool:
    if not conf.counters().redis_url:
        return False
    grace = timedelta(seconds=conf.get().fanout_grace_seconds)
    return inserted_at is None or timezone.now() - inserted_at < grace / 2


def _name() -> str:
    """The mark's name: the database's, so deployments sharing a Redis keep theirs apart."""
    return str(connections[DEFAULT_DB_ALIAS].settings_dict.get("NAME") or "default")
