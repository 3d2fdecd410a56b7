"""Consumer groups: a committed position per group, and leases on what was handed out.

Every read of a group takes the group's row lock, so two members never read at once:
a read first gives out the oldest expired, uncommitted lease again (its members may have
died), else the rows after everything leased or committed, leased for ``lease`` seconds
to the member that asked. The iterator a read answers names the end of its lease; a
commit with it marks that lease committed, and the committed position then moves over
the leading committed leases, in order (a member committing a later lease first does not
commit an earlier one another member still holds). A commit of a position no lease ends
at (an iterator of a plain feed read) commits everything up to it. The committed position
only moves forward, except by a seek. Times are the database's.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from deliveries.models import Endpoint, PollConsumer, PollLease
from deliveries.polling import feed
from deliveries.polling.positions import Position


@dataclass(frozen=True)
class Handout:
    rows: list[feed.FeedRow]
    #: Where this read's lease ends (the iterator to commit), or the read's start when
    #: it handed nothing out.
    end: Position
    #: Whether nothing more was there to hand out at the time of the read.
    done: bool


def db_now() -> datetime:
    """The database's clock (SQLite's is this process's)."""
    if connection.vendor != "postgresql":
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT CURRENT_TIMESTAMP")
        moment: datetime = cursor.fetchone()[0]
    return moment


def _locked(endpoint: Endpoint, name: str) -> PollConsumer:
    try:
        with transaction.atomic():
            PollConsumer.objects.get_or_create(endpoint=endpoint, name=name)
    except IntegrityError:
        pass  # created meanwhile by another member
    return PollConsumer.objects.select_for_update().get(endpoint=endpoint, name=name)


def committed(consumer: PollConsumer) -> Position:
    return Position(consumer.committed_xid, consumer.committed_id)


def _start(lease: PollLease) -> Position:
    return Position(lease.start_xid, lease.start_id)


def _end(lease: PollLease) -> Position:
    return Position(lease.end_xid, lease.end_id)


def group_hand_out(*, endpoint: Endpoint, name: str, limit: int, lease_seconds: float) -> Handout:
    """The next messages for a member of group ``name``, leased to it."""
    with transaction.atomic():
        consumer = _locked(endpoint, name)
        now = db_now()
        expires = now + timedelta(seconds=lease_seconds)
        for expired in consumer.leases.filter(committed=False, expires_at__lt=now).order_by(
            "start_xid", "start_id"
        ):
            rows = feed.rows_after(endpoint.pk, _start(expired), limit, until=_end(expired))
            if not rows:
                # Its rows are gone (erased, purged): nothing to give out again.
                expired.committed = True
                expired.save(update_fields=["committed"])
                continue
            if rows[-1].position < _end(expired):
                # More than this member asked for: it takes the first part.
                PollLease.objects.create(
                    consumer=consumer,
                    start_xid=expired.start_xid,
                    start_id=expired.start_id,
                    end_xid=rows[-1].position.xid,
                    end_id=rows[-1].position.id,
                    count=len(rows),
                    expires_at=expires,
                )
                expired.start_xid, expired.start_id = rows[-1].position.xid, rows[-1].position.id
                expired.count = max(expired.count - len(rows), 1)
                expired.save(update_fields=["start_xid", "start_id", "count"])
                _fold(consumer)
                return Handout(rows, rows[-1].position, done=False)
            expired.expires_at = expires
            expired.count = len(rows)
            expired.save(update_fields=["expires_at", "count"])
            _fold(consumer)
            return Handout(rows, _end(expired), done=False)
        _fold(consumer)
        start = committed(consumer)
        last = consumer.leases.order_by("-end_xid", "-end_id").first()
        if last is not None and _end(last) > start:
            start = _end(last)
        rows = feed.rows_after(endpoint.pk, start, limit)
        if not rows:
            return Handout([], start, done=True)
        PollLease.objects.create(
            consumer=consumer,
            start_xid=start.xid,
            start_id=start.id,
            end_xid=rows[-1].position.xid,
            end_id=rows[-1].position.id,
            count=len(rows),
            expires_at=expires,
        )
        return Handout(rows, rows[-1].position, done=len(rows) < limit)


def group_commit(*, endpoint: Endpoint, name: str, position: Position) -> Position:
    """Commit what a read handed out up to ``position``; returns the committed position.
    Committing again, or a position already committed, changes nothing."""
    with transaction.atomic():
        consumer = _locked(endpoint, name)
        if position <= committed(consumer):
            return committed(consumer)
        lease = consumer.leases.filter(end_xid=position.xid, end_id=position.id).first()
        if lease is not None:
            if not lease.committed:
                lease.committed = True
                lease.save(update_fields=["committed"])
        else:
            _set_committed(consumer, position)
            for other in consumer.leases.all():
                if _end(other) <= position:
                    other.delete()
        _fold(consumer)
        return committed(consumer)


def group_seek(*, endpoint: Endpoint, name: str, position: Position) -> Position:
    """Move the group to ``position`` (backwards too); its leases are dropped."""
    with transaction.atomic():
        consumer = _locked(endpoint, name)
        consumer.leases.all().delete()
        _set_committed(consumer, position)
        return position


def _set_committed(consumer: PollConsumer, position: Position) -> None:
    consumer.committed_xid, consumer.committed_id = position.xid, position.id
    consumer.committed_at = db_now()
    consumer.save(update_fields=["committed_xid", "committed_id", "committed_at", "updated_at"])


def _fold(consumer: PollConsumer) -> None:
    """Move the committed position over the leading committed leases."""
    position = committed(consumer)
    moved = False
    for lease in consumer.leases.order_by("start_xid", "start_id"):
        if _end(lease) <= position:
            lease.delete()
        elif lease.committed and _start(lease) <= position:
            position = _end(lease)
            moved = True
            lease.delete()
        else:
            break
    if moved:
        _set_committed(consumer, position)


@dataclass(frozen=True)
class ConsumerState:
    name: str
    position: Position
    committed_at: datetime | None
    lag: int
    leased: int


def consumers_of(*, endpoint_id: UUID) -> list[ConsumerState]:
    """The endpoint's consumer groups with their positions, lags (messages after the
    committed position) and messages leased and not committed."""
    return [
        ConsumerState(
            name=consumer.name,
            position=committed(consumer),
            committed_at=consumer.committed_at,
            lag=feed.count_after(endpoint_id, committed(consumer)),
            leased=sum(lease.count for lease in consumer.leases.all() if not lease.committed),
        )
        for consumer in PollConsumer.objects.filter(endpoint_id=endpoint_id).prefetch_related(
            "leases"
        )
    ]
