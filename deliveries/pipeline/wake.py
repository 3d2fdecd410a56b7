"""The wake: telling an endpoint that it has work, and nothing more.

The message (`deliveries.tasks.work_endpoint`) names no rows: the endpoint's owner claims
whatever is due when it runs. At most one such message is out per endpoint (its mark, see
`wake_marks`), so the messages of a busy endpoint do not grow with its events.
"""

import contextlib
from collections.abc import Iterable
from typing import Any
from uuid import UUID

import redis
from celery import current_app as celery_app

from deliveries import conf, metrics
from deliveries.pipeline.messages import WORK_ENDPOINT_TASK
from deliveries.pipeline.wake_marks import WakeBook, get_book
from webhooks_core.runtime.tasking import QUEUE_DELIVERY

# A wake's mark outlives its due time by this much: long enough for a queued message to be
# consumed, short enough that a lost one is forgotten soon.
MARK_SECONDS = 60.0


def wake_book() -> WakeBook:
    return get_book(conf.counters().redis_url)


def wake_endpoints(
    endpoint_ids: Iterable[UUID | str], countdown: float = 0.0, *, stale_after: float = -1.0
) -> int:
    """Tell each endpoint's owner-to-be that it has work (due now, or in `countdown`
    seconds); returns how many messages were dispatched. A wake folded into one already
    out, or into a working owner's next look, dispatches nothing. With `stale_after`, a
    mark older than that many seconds past its due time is taken as a lost message (the
    sweeper's case)."""
    book = wake_book()
    wanted = list(dict.fromkeys(str(e) for e in endpoint_ids))
    try:
        marked = book.mark_many(wanted, countdown, MARK_SECONDS, stale_after) if wanted else []
    except redis.RedisError:
        marked = [True] * len(wanted)  # the marks only save messages; the database keeps the truth
    dispatched: list[str] = []
    for endpoint_id, fresh in zip(wanted, marked, strict=True):
        metrics.wakes_total.labels(result="dispatched" if fresh else "folded").inc()
        if fresh:
            dispatched.append(endpoint_id)
    if dispatched:
        _dispatch(dispatched, countdown)
    return len(dispatched)


def wake_after_hold(endpoint_id: str, seconds: float) -> None:
    """The wake of an endpoint on hold (an open circuit, a rate limit, a peer that did not
    answer) for `seconds`: one message for when the hold ends, and a mark that folds the
    wakes meanwhile. Each of them could only find the hold and send one more message: with
    events coming, a held endpoint cost two messages and a task per event, on the cores of
    the healthy ones."""
    with contextlib.suppress(redis.RedisError):  # more messages then, never fewer
        wake_book().held(endpoint_id, seconds, MARK_SECONDS)
    metrics.wakes_total.labels(result="dispatched").inc()
    _dispatch([endpoint_id], max(seconds, 0.01))


def _dispatch(endpoint_ids: list[str], countdown: float) -> None:
    options: dict[str, Any] = {"queue": QUEUE_DELIVERY}
    if countdown > 0:
        options["countdown"] = countdown
    # One producer (and broker connection) for all the messages.
    with celery_app.producer_or_acquire() as producer:
        for endpoint_id in endpoint_ids:
            celery_app.send_task(WORK_ENDPOINT_TASK, (endpoint_id,), producer=producer, **options)
