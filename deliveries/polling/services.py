"""What the consumer API, the portal and the admin call for pull delivery.

Reading: `feed_read` (a stateless iterator), `group_read`, `group_commit`, `group_seek`
(consumer groups), `long_poll` (wraps either read with a wait). Keys: `poll_key_issue`.
Creating: `endpoint_create_with_key` (a polling endpoint with its key). Showing:
`consumers_with_lag`, `poll_path`. Every read is limited to one endpoint; the
caller has checked that the key is that endpoint's (`keys.endpoint_of_key`).
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection, transaction
from django.urls import reverse

from deliveries import conf as delivery_conf
from deliveries.endpoints import principals
from deliveries.models import Endpoint, EndpointMode
from deliveries.operator.tenant_settings import tenant_retention
from deliveries.polling import feed, groups, keys, positions, records, waiters
from deliveries.polling.groups import ConsumerState
from deliveries.polling.positions import Cursor, InvalidIterator

__all__ = [
    "ConsumerState",
    "InvalidIterator",
    "IteratorExpired",
    "NewEndpoint",
    "NoSigningSecret",
    "Page",
    "consumers_with_lag",
    "endpoint_create_with_key",
    "feed_read",
    "group_commit",
    "group_read",
    "group_seek",
    "long_poll",
    "poll_key_issue",
    "poll_path",
]


class IteratorExpired(Exception):
    """The iterator is older than the endpoint's retention: messages after it may be gone."""


class NoSigningSecret(Exception):
    """The endpoint has no unexpired signing secret (or key): messages cannot be signed."""


@dataclass(frozen=True)
class Page:
    data: list[dict[str, Any]]
    iterator: str
    done: bool


@dataclass(frozen=True)
class NewEndpoint:
    """An endpoint just created, with what is shown this once: its signing secret and,
    for a polling endpoint, its consumer's key (None for a push endpoint)."""

    endpoint: Endpoint
    secret: str
    poll_key: str | None


@transaction.atomic
def endpoint_create_with_key(*, principal: principals.Principal, **fields: Any) -> NewEndpoint:
    """`principals.endpoint_create_by`, and a polling endpoint's key in the same
    transaction: a polling endpoint is never left without one. Raises what it raises."""
    endpoint, secret = principals.endpoint_create_by(principal=principal, **fields)
    if endpoint.mode != EndpointMode.POLL:
        return NewEndpoint(endpoint, secret, None)
    key = poll_key_issue(endpoint_id=endpoint.pk)
    endpoint.refresh_from_db()
    return NewEndpoint(endpoint, secret, key)


def poll_key_issue(*, endpoint_id: UUID) -> str:
    """A new consumer key for the endpoint (a polling endpoint's, or a push endpoint's
    catch-up key), returned once; the previous key stops working at once."""
    return keys.endpoint_issue_poll_key(endpoint_id=endpoint_id)


def poll_path(endpoint_id: UUID) -> str:
    """The path of the endpoint's feed (``request.build_absolute_uri`` makes it a URL)."""
    return reverse("api:poll", kwargs={"endpoint_id": str(endpoint_id)})


def _retention_seconds(endpoint: Endpoint) -> float:
    if endpoint.tenant:
        days = tenant_retention(tenant=endpoint.tenant).event_retention_days
    else:
        days = delivery_conf.get().event_retention_days
    return float(days) * 86400


def _cursor_after(rows: list[feed.FeedRow], start: Cursor) -> Cursor:
    if not rows:
        # Nothing after it now: whatever comes is newer than this read.
        return Cursor(start.endpoint_id, start.position, max(start.at, time.time()))
    last = rows[-1]
    return Cursor(start.endpoint_id, last.position, max(start.at, last.created_at.timestamp()))


def _messages(endpoint: Endpoint, rows: list[feed.FeedRow]) -> list[dict[str, Any]]:
    try:
        return feed.messages(endpoint, rows)
    except ValueError as exc:
        # signing.signature_headers: no unexpired secret (or v1a key) to sign with.
        raise NoSigningSecret(str(exc)) from None


def feed_read(
    *,
    endpoint: Endpoint,
    iterator: str | None = None,
    after: datetime | None = None,
    limit: int = 50,
    consumer: str = "",
) -> Page:
    """The messages after ``iterator`` (or created after ``after``, or from the
    endpoint's creation), oldest first. Raises `InvalidIterator`, `IteratorExpired`."""
    endpoint_id = str(endpoint.pk)
    if iterator:
        start = positions.decode(iterator, endpoint_id=endpoint_id)
        if positions.expired(
            start, now=time.time(), retention_seconds=_retention_seconds(endpoint)
        ):
            raise IteratorExpired(
                "This iterator is older than the endpoint's retention: messages after it "
                "may have been deleted. Start again without an iterator, or with ?after=."
            )
    elif after is not None:
        start = Cursor(endpoint_id, feed.position_before(endpoint.pk, after), after.timestamp())
    else:
        start = Cursor(endpoint_id, positions.START, endpoint.created_at.timestamp())
    rows = feed.rows_after(endpoint.pk, start.position, limit)
    data = _messages(endpoint, rows)
    answer = positions.encode(_cursor_after(rows, start))
    records.poll_record(
        endpoint=endpoint,
        consumer=consumer,
        count=len(data),
        iterator=iterator or "",
        next_iterator=answer,
    )
    return Page(data, answer, done=len(rows) < limit)


def group_read(
    *, endpoint: Endpoint, name: str, limit: int = 50, lease_seconds: float = 30
) -> Page:
    """The next messages for a member of consumer group ``name``, leased to it for
    ``lease_seconds``; the answer's iterator commits them (`group_commit`)."""
    handout = groups.group_hand_out(
        endpoint=endpoint, name=name, limit=limit, lease_seconds=lease_seconds
    )
    at = handout.rows[-1].created_at.timestamp() if handout.rows else time.time()
    answer = positions.encode(Cursor(str(endpoint.pk), handout.end, at))
    data = _messages(endpoint, handout.rows)
    records.poll_record(
        endpoint=endpoint, consumer=name, count=len(data), iterator="", next_iterator=answer
    )
    return Page(data, answer, done=handout.done)


def group_commit(*, endpoint: Endpoint, name: str, iterator: str) -> str:
    """Commit group ``name`` up to ``iterator`` (a group read's answer); returns the
    committed position's iterator. Idempotent; never moves the position backwards."""
    cursor = positions.decode(iterator, endpoint_id=str(endpoint.pk))
    committed = groups.group_commit(endpoint=endpoint, name=name, position=cursor.position)
    return positions.encode(Cursor(str(endpoint.pk), committed, cursor.at))


def group_seek(
    *, endpoint: Endpoint, name: str, iterator: str | None = None, after: datetime | None = None
) -> str:
    """Move group ``name`` to ``iterator`` or to the messages created after ``after``
    (backwards too); its leases are dropped. Returns the new position's iterator."""
    if iterator:
        cursor = positions.decode(iterator, endpoint_id=str(endpoint.pk))
    elif after is not None:
        cursor = Cursor(
            str(endpoint.pk), feed.position_before(endpoint.pk, after), after.timestamp()
        )
    else:
        raise InvalidIterator("Give an iterator or a time (after) to seek to.")
    groups.group_seek(endpoint=endpoint, name=name, position=cursor.position)
    return positions.encode(cursor)


def consumers_with_lag(*, endpoint_id: UUID) -> list[ConsumerState]:
    """The endpoint's consumer groups: name, committed position, when it was committed,
    lag (messages after it) and messages leased and not committed."""
    return groups.consumers_of(endpoint_id=endpoint_id)


def long_poll(read: Callable[[], Page], *, endpoint_id: UUID, key: str, wait: float) -> Page:
    """``read()``, and while it finds nothing, wait up to ``wait`` seconds for a notice
    and read again. The database connection is given back before each wait. Raises
    `waiters.TooManyWaits` over the bounds (before reading)."""
    if wait <= 0:
        return read()
    deadline = time.monotonic() + wait
    with waiters.hub().waiting(str(endpoint_id), key) as event:
        reads_since_notice: int | None = None
        while True:
            # Cleared before the read: a notice that comes during it is not lost.
            event.clear()
            # Asked before the read, so a row it finds hidden is either read or still
            # hidden then. With none hidden, a notice's rows were read before ours (by
            # another member of a consumer group): no quick rechecks, the next notice.
            hidden = reads_since_notice is not None and feed.rows_hidden(endpoint_id)
            page = read()
            remaining = deadline - time.monotonic()
            if page.data or remaining <= 0:
                return page
            if not hidden:
                reads_since_notice = None
            _release_connection()
            interval = waiters.recheck_interval(reads_since_notice=reads_since_notice)
            if event.wait(min(remaining, interval)):
                reads_since_notice = 0
            elif reads_since_notice is not None:
                # A notice came but its message is not visible yet: read again soon.
                reads_since_notice += 1


def _release_connection() -> None:
    # Not inside a transaction (a test's, a host's ATOMIC_REQUESTS): closing would end it.
    if not connection.in_atomic_block:
        connection.close()
