"""Fan-out: one Delivery row per endpoint subscribed to an event."""

import copy
import functools
import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.models import Q, QuerySet
from django.db.models.functions import Now
from django.utils import timezone

from deliveries import conf
from deliveries.breaker.shared import circuit_reopens_at
from deliveries.endpoints import operational_events
from deliveries.models import Delivery, DeliveryStatus, Endpoint, EndpointMode, EndpointState, Event
from deliveries.pipeline import fanout_mark, ordering, payloads, subscriptions
from deliveries.pipeline.emit_batch import EmitBatch, emit_batch
from deliveries.pipeline.messages import (
    FAN_OUT_BATCH_SIZE,
    FAN_OUT_EVENTS_TASK,
    dispatch_fan_outs,
    dispatch_task,
)
from deliveries.pipeline.wake import wake_endpoints
from deliveries.polling import waiters
from webhooks_core import tracing
from webhooks_core.db.sql import insert_row, insert_rows, insert_with, sql_cursor, tried_again

# Of the events one transaction emits, at most this many are fanned out by the emitting
# process after its commit; the rest go to the fan-out task, which creates a large
# transaction's deliveries in a few statements.
INLINE_EVENTS_PER_TRANSACTION = 20

T = TypeVar("T")

logger = logging.getLogger(__name__)


def new_delivery(*, event_id: Any, endpoint: Endpoint, now: datetime, **fields: Any) -> Delivery:
    """A delivery ready to go: pending for an active endpoint, held for a suspended one
    (resuming it delivers what it missed), available for a polling endpoint (its consumer
    reads it; no owner claims that state). Fan-out and replays both create them here."""
    status = (
        DeliveryStatus.PENDING if endpoint.state == EndpointState.ACTIVE else DeliveryStatus.HELD
    )
    if endpoint.mode == EndpointMode.POLL:
        status = DeliveryStatus.AVAILABLE
    # Due at once by the database's clock, the one every claim compares with (this
    # host's may be ahead of it).
    due_at: datetime | Now = Now()
    reopens_at = circuit_reopens_at(endpoint)
    if reopens_at is not None and reopens_at > now:
        # Its circuit is open: the delivery waits in the database, with no wake, until
        # the probe may go (a wake now would only find the circuit open).
        due_at = reopens_at
    return Delivery(
        event_id=event_id, endpoint=endpoint, status=status, next_attempt_at=due_at, **fields
    )


def event_insert(event: Event) -> None:
    """Insert a new event in the current transaction and see to its fan-out.

    Nothing else of ours runs in the product's transaction: no delivery row (one that
    referenced an endpoint deleted meanwhile would fail the product's COMMIT), no read of
    the endpoints (one created later in the transaction must get the event too). After
    the commit, the emitting process fans the first few events out itself when their
    tenant has few endpoints (`WEBHOOKS_INLINE_FAN_OUT_MAX_ENDPOINTS`): one broker hop
    less. The rest, and events with an ordering key, go to the fan-out task. Either way a
    committed event gets its deliveries exactly once; should the process die between the
    commit and the fan-out, the sweeper does it. Outside a transaction: `_insert_alone`.
    """
    db = transaction.get_connection()
    if db.get_autocommit() and not db.in_atomic_block:
        _insert_alone(event)
        return
    insert_row(event)
    _add(emit_batch(), event)


def _insert_alone(event: Event) -> None:
    """An event emitted outside any transaction (the events API's): when its tenant has
    few endpoints, it and its deliveries are written together by one statement, the
    endpoints read just before (no second transaction to mark it fanned out) and once
    more just after, for one created meanwhile. Otherwise, or if that write fails, the
    event is committed by its own INSERT and its fan-out seen to as a commit's would be
    (robustly: once it is stored, the fan-out task or the sweeper has it)."""
    limit = conf.get().inline_fan_out_max_endpoints
    inline = True  # (as `_add` decides)
    if limit and not event.ordering_key:
        written: tuple[list[Endpoint], list[Delivery]] | bool | None
        try:
            written = _retried_if_an_endpoint_went(lambda: _write_fanned_out(event, limit))
        except Exception:
            logger.exception("writing an event with its deliveries failed; writing it alone")
            event.fanned_out_at, written = None, False
        if isinstance(written, tuple):
            _see_to_written(event, *written)
            return
        inline = written is not None  # None: too many endpoints, the task's (no second read)
    try:
        insert_row(event)
    except IntegrityError:
        if Event.objects.filter(pk=event.pk).exists():
            return  # written with its deliveries after all (the failure came after)
        raise
    alone = EmitBatch()
    _add(alone, event, inline=inline)
    try:
        alone.flush()
    except Exception:
        logger.exception("seeing to a committed event's fan-out failed")


def _write_fanned_out(event: Event, limit: int) -> tuple[list[Endpoint], list[Delivery]] | None:
    """Write the event, fanned out, and its deliveries together (one statement) if its
    tenant has at most `limit` endpoints: the endpoints read and the deliveries written
    (None: too many endpoints, nothing written)."""
    endpoints = _few_candidates(event.tenant, limit)
    if endpoints is None:
        return None
    now = timezone.now()
    event.fanned_out_at = now
    deliveries = _deliveries_of(_as_stored(event), endpoints, now)
    insert_with(event, deliveries)
    return endpoints, deliveries


def _see_to_written(event: Event, endpoints: list[Endpoint], deliveries: list[Delivery]) -> None:
    """After an event was written with its deliveries (no transaction is open: all of this
    runs now, robustly). An endpoint whose creation committed between the read of the
    endpoints and the write gets its delivery too: every endpoint existing at the event's
    commit gets it. Then the wakes."""
    read = [endpoint.pk for endpoint in endpoints]
    try:
        if _late_endpoint_exists(event.tenant, read):
            late = list(_candidate_endpoints({event.tenant}).exclude(pk__in=read))
            more = _deliveries_of(_as_stored(event), late, timezone.now())
            insert_rows(more)
            deliveries = [*deliveries, *more]
    except Exception:
        logger.exception(
            "reading the endpoints again after event %s was written failed; one created "
            "while it was written may not get it",
            event.pk,
        )
    woken = _due_now(deliveries)
    transaction.on_commit(lambda: wake_endpoints(woken), robust=True)
    _notify_readers_on_commit(deliveries)


def _add(batch: EmitBatch, event: Event, *, inline: bool = True) -> None:
    if batch.inserted_at is None and isinstance(event.created_at, datetime):
        batch.inserted_at = event.created_at
    inline = inline and bool(conf.get().inline_fan_out_max_endpoints) and not event.ordering_key
    if inline and len(batch.inline_events) < INLINE_EVENTS_PER_TRANSACTION:
        batch.inline_events.append(_as_stored(event))
        batch.fan_out_inline = events_fan_out_if_few_endpoints
    else:
        batch.event_ids.append(event.pk)


def _as_stored(event: Event) -> Event:
    """A copy of the event with its data as its row holds it: the product still holds
    the dict it passed and may change it before the commit, and payload filters and
    withheld operational events must decide on what is delivered."""
    stored = copy.copy(event)
    if event.data is not None:
        stored.data = json.loads(json.dumps(event.data))
    return stored


# A fan-out whose commit fails because an endpoint it read was deleted meanwhile (its new
# deliveries' foreign key) is tried again this many times in all, reading the endpoints
# again: the other endpoints' deliveries are not held back for the sweeper's grace.
FAN_OUT_TRIES = 3


def _retried_if_an_endpoint_went(work: Callable[[], T]) -> T:
    return tried_again(work, tries=FAN_OUT_TRIES, when=_an_endpoint_went)


def _an_endpoint_went(exc: Exception) -> bool:
    """A foreign key's violation (PostgreSQL's 23503; SQLite names none)."""
    return isinstance(exc, IntegrityError) and getattr(exc.__cause__, "sqlstate", None) in (
        None,
        "23503",
    )


def events_fan_out_if_few_endpoints(events: list[Event]) -> list[UUID]:
    """Fan out, right now, the events (as inserted, without ordering keys) whose tenant
    has at most the inline limit of endpoints; returns the others' ids (for the fan-out
    task).

    The lean path of `events_fan_out` for events this process has just committed: their
    fields are in memory (no read of them), each tenant's endpoints are read once, up to
    one past the limit (no count), and one statement both locks the events and marks them
    fanned out. An event of a rolled-back savepoint has no row: nothing marks it, and it
    gets no delivery. Endpoints are read after the product's commit, so every endpoint
    existing then gets the events."""
    return _retried_if_an_endpoint_went(lambda: _fan_out_if_few_endpoints(events))


def _fan_out_if_few_endpoints(events: list[Event]) -> list[UUID]:
    limit = conf.get().inline_fan_out_max_endpoints
    endpoints: dict[str | None, list[Endpoint]] = {}
    for tenant in dict.fromkeys(event.tenant for event in events):
        candidates = _few_candidates(tenant, limit)
        if candidates is not None:
            endpoints[tenant] = candidates
    now_events = [event for event in events if event.tenant in endpoints]
    if now_events:
        now = timezone.now()
        with transaction.atomic():
            marked = _mark_fanned_out([event.pk for event in now_events], now)
            deliveries = [
                delivery
                for event in now_events
                if event.pk in marked
                for delivery in _deliveries_of(event, endpoints[event.tenant], now)
            ]
            insert_rows(deliveries)  # few (one statement of ours; a large one is the task's)
            woken = _due_now(deliveries)
            transaction.on_commit(lambda: wake_endpoints(woken), robust=True)
            _notify_readers_on_commit(deliveries)
    return [event.pk for event in events if event.tenant not in endpoints]


def _mark_fanned_out(event_ids: list[UUID], now: datetime) -> set[UUID]:
    """Lock and mark the events of these ids still waiting for their fan-out (one that
    another fan-out holds is skipped: that one does it); returns their ids."""
    if connection.vendor == "postgresql":
        table = connection.ops.quote_name(Event._meta.db_table)
        with sql_cursor([Event._meta.db_table]) as cursor:
            cursor.execute(
                f"UPDATE {table} SET fanned_out_at = %s WHERE id IN ("  # noqa: S608 (our table)
                f"SELECT id FROM {table} WHERE id = ANY(%s) AND fanned_out_at IS NULL "
                "FOR UPDATE SKIP LOCKED) RETURNING id",
                [now, event_ids],
            )
            return {row[0] for row in cursor.fetchall()}
    ids = set(_waiting_locked(event_ids).values_list("pk", flat=True))
    Event.objects.filter(pk__in=ids).update(fanned_out_at=now)
    return ids


def _waiting_locked(event_ids: Collection[UUID | str]) -> QuerySet[Event]:
    """The events of these ids still waiting for their fan-out, locked; one that another
    fan-out holds is skipped, not waited for (that one does it)."""
    return Event.objects.select_for_update(skip_locked=True).filter(
        pk__in=list(event_ids), fanned_out_at__isnull=True
    )


def due_at_once(delivery: Delivery) -> bool:
    """Whether a delivery `new_delivery` made is due at its insert (held ones, and those
    behind an open circuit, wait without a wake)."""
    return delivery.status == DeliveryStatus.PENDING and isinstance(delivery.next_attempt_at, Now)


def _due_now(deliveries: list[Delivery]) -> set[UUID]:
    """The endpoints with a delivery due now among these."""
    return {delivery.endpoint_id for delivery in deliveries if due_at_once(delivery)}


def event_fan_out(*, event_id: UUID | str) -> int:
    """Fan one event out; see `events_fan_out`."""
    return events_fan_out(event_ids=[event_id])


def events_fan_out(*, event_ids: Collection[UUID | str], top_up: bool = False) -> int:
    """Create the events' deliveries and wake their endpoints after commit. Safe to run again.

    All the events go in one transaction, so a product transaction that emitted many
    events costs a few statements, and each endpoint gets one wake for all of them.
    With `top_up` (a fan-out message) the other events still waiting for their fan-out,
    created in the last `WEBHOOKS_FANOUT_GRACE_SECONDS` (older ones are the sweeper's),
    come along, and the fan-out stays on while more keep coming (`_stay_on`). Endpoints
    that are suspended get a held delivery, so resuming them delivers what they missed;
    disabled endpoints get nothing. Returns how many deliveries were created.
    """
    if not top_up:
        return _fan_out_these(event_ids, top_up=False)
    # A message's task: whatever happens, it ends by clearing the fan-out's mark and
    # looking once more (`_stay_on`), else the commits that found the mark set would
    # wait for the sweeper.
    created = 0
    try:
        created = _fan_out_these(event_ids, top_up=True)
    finally:
        created += _stay_on()
    return created


def _fan_out_these(event_ids: Collection[UUID | str], *, top_up: bool) -> int:
    try:
        created, _, _ = _retried_if_an_endpoint_went(lambda: _fan_out(event_ids, top_up))
        return created
    except Exception as batch_error:
        if len(event_ids) < 2 and not top_up:
            raise
        # One event whose fan-out fails must not hold back the others of its message (the
        # sweeper sends the oldest waiting events together, again and again), nor one
        # waiting event the message's own: each alone, then the first error.
        logger.exception("fanning out a batch of events failed; fanning out each alone")
        created, _, failed = _fan_out_each(event_ids)
        if failed:
            raise failed[0][1] from batch_error
        return created


# A fan-out message stays on while events keep coming, for at most this long; it looks
# again this often when it found none, and stops after so many looks in a row found none.
STAY_ON_SECONDS = 5.0
LOOK_AGAIN_SECONDS = 0.005
LOOKS_WITHOUT_EVENTS = 4
# One look takes at most this many pages of waiting events; the last look, up to
# `LAST_LOOK_PAGES`, and then one more message goes on from there.
TOP_UP_PAGES = 10
LAST_LOOK_PAGES = 100


def _stay_on() -> int:
    """Fan out what keeps coming, then clear the fan-out's mark and take what came
    meanwhile: a commit whose mark was already set (`fanout_mark.dispatch`) sent no
    message, and is seen by this last look, which comes after the clear. A look goes on
    from where the last one stopped (held keyed events never keep it at the start)."""
    created, looks, ends, at = 0, 0, time.monotonic() + STAY_ON_SECONDS, None
    try:
        while looks < LOOKS_WITHOUT_EVENTS and time.monotonic() < ends:
            more, taken, at = _look(at, TOP_UP_PAGES)
            created += more
            if taken:
                looks = 0
            elif at is None:
                looks += 1
                time.sleep(LOOK_AGAIN_SECONDS)
    finally:
        # Failing too: the next commit then sends a message at once, not after the mark's
        # expiry.
        fanout_mark.clear()
    more, _, at = _look(None, LAST_LOOK_PAGES)
    if at is not None:
        dispatch_task(FAN_OUT_EVENTS_TASK, [])  # still more: one message goes on with them
    return created + more


def _look(after: "Position | None", pages: int) -> tuple[int, int, "Position | None"]:
    """Fan out the waiting events after `after`, a page per transaction (a page that
    fails, event by event: a poison event is the sweeper's, the others go on); returns
    the deliveries created, the events taken, and where it stopped (None: at the end)."""
    created = taken = 0
    for _ in range(pages):
        start = after
        try:
            more, took, after = _retried_if_an_endpoint_went(
                functools.partial(_fan_out, [], True, after=start)
            )
        except Exception:
            logger.exception("fanning out a page of waiting events failed; each alone")
            page = list(_waiting(timezone.now(), exclude=[], after=start)[:FAN_OUT_BATCH_SIZE])
            more, took, failed = _fan_out_each([event.pk for event in page])
            for event_id, error in failed:
                logger.error(
                    "fanning out event %s failed (the sweeper tries again)",
                    event_id,
                    exc_info=error,
                )
            after = ordering.position(page[-1]) if len(page) == FAN_OUT_BATCH_SIZE else None
        created, taken = created + more, taken + took
        if after is None:
            return created, taken, None
    return created, taken, after


def _fan_out_each(
    event_ids: Collection[UUID | str],
) -> tuple[int, int, list[tuple[UUID | str, Exception]]]:
    """Each event in a transaction of its own; returns the deliveries created, the events
    taken, and the events that failed with their errors."""
    created = taken = 0
    failed: list[tuple[UUID | str, Exception]] = []
    for event_id in event_ids:
        try:
            done, _, _ = _retried_if_an_endpoint_went(
                functools.partial(_fan_out, [event_id], False)
            )
            created, taken = created + done, taken + 1
        except Exception as exc:
            failed.append((event_id, exc))
    return created, taken, failed


Position = tuple[datetime, UUID]


def _fan_out(
    event_ids: Collection[UUID | str], top_up: bool, after: Position | None = None
) -> tuple[int, int, Position | None]:
    """One transaction's fan-out; returns how many deliveries it created, how many events
    it took and, when its top-up filled a page, the position to go on from."""
    now = timezone.now()
    # Read first, write after: a keyed event waits while an earlier one of its key is
    # still waiting for its fan-out, and that is decided before this transaction's first
    # write or row lock gives it its id (the feed's position; see the design page).
    events = list(
        Event.objects.filter(pk__in=list(event_ids), fanned_out_at__isnull=True).order_by(
            "created_at", "pk"
        )
    )
    resume: Position | None = None
    room = FAN_OUT_BATCH_SIZE - len(events)
    if top_up and room > 0:
        page = list(_waiting(now, exclude=[event.pk for event in events], after=after)[:room])
        if len(page) == room:
            resume = ordering.position(page[-1])
        events += page
        events.sort(key=ordering.position)
    held = ordering.held_back(events)
    events = [event for event in events if event.pk not in held]
    if not events:
        return 0, 0, resume
    with transaction.atomic():
        # Locked and marked: of two fan-outs of an event, one does it. An event another
        # fan-out holds is skipped, not waited for: that one does it (or, if it fails, the
        # sweeper), and this thread goes on with other work instead of queueing behind it.
        taken = _mark_fanned_out([event.pk for event in events], now)
        # A keyed event whose earlier one (of this batch) was not taken waits for it, and
        # its message is sent again after this commit.
        behind = ordering.behind_one_not_taken(events, taken)
        if behind:
            Event.objects.filter(pk__in=behind).update(fanned_out_at=None)
        events = [event for event in events if event.pk in taken and event.pk not in behind]
        endpoints = _endpoints_by_tenant({event.tenant for event in events})
        # In position order: a key's rows of one fan-out get ascending ids.
        deliveries = [
            delivery
            for event in events
            for delivery in _deliveries_of(event, endpoints.get(event.tenant, []), now)
        ]
        # No conflicts are possible: an event's normal deliveries are only ever created in
        # the transaction that sets its `fanned_out_at`, and its row is locked here.
        Delivery.objects.bulk_create(deliveries)
        woken = _due_now(deliveries)
        keyed = [event for event in events if event.ordering_key]
        keys = list(dict.fromkeys(event.ordering_key for event in events if event.ordering_key))

        def wake() -> None:
            # Later events of these keys may have waited for this fan-out, elsewhere too.
            others = set()
            for key in keys:
                others |= ordering.endpoints_with_next_due(ordering_key=key)
            wake_endpoints(woken | others)

        def follow() -> None:
            _follow([*ordering.waiting_after(keyed, limit=FAN_OUT_BATCH_SIZE), *behind])

        transaction.on_commit(wake, robust=True)
        if keyed or behind:
            transaction.on_commit(follow, robust=True)
        _notify_readers_on_commit(deliveries)
    return len(deliveries), len(events), resume


def _waiting(now: datetime, *, exclude: list[UUID], after: Position | None) -> QuerySet[Event]:
    """The events waiting for their fan-out, created in the last grace period, in position
    order (after `after`)."""
    grace = timedelta(seconds=conf.get().fanout_grace_seconds)
    waiting = Event.objects.filter(fanned_out_at__isnull=True, created_at__gte=now - grace)
    if after is not None:
        waiting = waiting.filter(
            Q(created_at__gt=after[0]) | Q(created_at=after[0], pk__gt=after[1])
        )
    return waiting.exclude(pk__in=exclude).order_by("created_at", "pk")


_following = threading.local()


def _follow(later: list[Any]) -> None:
    """After a fan-out's commit, fan out the events of its keys that wait behind it (it
    may have held them back, or another fan-out it was ahead of did): at once, not at the
    sweeper's next look. Here, in this process, with no message (most are on their way
    with messages of their own, which then find them done); one level deep, then by a
    message, so a key's steady stream never nests fan-outs."""
    later = list(dict.fromkeys(later))
    if not later:
        return
    if getattr(_following, "active", False):
        dispatch_fan_outs(later)
        return
    _following.active = True
    try:
        events_fan_out(event_ids=later)
    finally:
        _following.active = False


def _notify_readers_on_commit(deliveries: list[Delivery]) -> None:
    """After the commit, wake the long polls of the polling endpoints that got rows."""
    polled = {d.endpoint_id for d in deliveries if d.status == DeliveryStatus.AVAILABLE}
    if polled:
        transaction.on_commit(lambda: waiters.notify(polled), robust=True)


def _endpoints_by_tenant(wanted: set[str | None]) -> dict[str | None, list[Endpoint]]:
    """The endpoints that may receive events of these tenants, by tenant."""
    by_tenant: dict[str | None, list[Endpoint]] = defaultdict(list)
    for endpoint in _candidate_endpoints(wanted):
        by_tenant[endpoint.tenant].append(endpoint)
    return by_tenant


# What fan-out reads of an endpoint.
_CANDIDATE_FIELDS = (
    "id",
    *subscriptions.FIELDS,
    "state",
    "mode",
    "ordered_delivery",
    "circuit_state",
    "circuit_changed_at",
)


def _candidate_endpoints(wanted: set[str | None]) -> QuerySet[Endpoint]:
    """The endpoints that may receive events of these tenants.

    An event reaches its own tenant's endpoints only, and an event without a tenant only
    the endpoints without one: tenants never see each other's events.
    """
    named = [tenant for tenant in wanted if tenant is not None]
    condition = Q(tenant__in=named)
    if None in wanted:
        condition |= Q(tenant__isnull=True)
    return (
        Endpoint.objects.filter(condition)
        .exclude(state=EndpointState.DISABLED)
        .only(*_CANDIDATE_FIELDS)
        .order_by("pk")
    )


# A tenant found above the inline limit is taken to be so for this long, by this process:
# its events go to the fan-out task without the read. A hint only (the task reads the
# endpoints itself), forgotten when this process saves or deletes an endpoint.
MANY_ENDPOINTS_HINT_SECONDS = 1.0
MANY_ENDPOINTS_HINTS = 10_000  # at most, then all forgotten
_MANY_ENDPOINTS: dict[tuple[str, str | None, int], float] = {}


def forget_many_endpoints(**_: Any) -> None:
    """Forget which tenants were found above the inline limit (a receiver of Endpoint's
    `post_save` and `post_delete`)."""
    _MANY_ENDPOINTS.clear()


def _few_candidates(tenant: str | None, limit: int) -> list[Endpoint] | None:
    """A tenant's candidate endpoints (`_candidate_endpoints`) if it has at most `limit`,
    else None. Asked after every commit that emits: on PostgreSQL one statement of ours,
    prepared, whose rows become models only when they are few (a tenant above the limit
    costs the product a read of a few ids' worth, not the ORM's query and models)."""
    db = connections[DEFAULT_DB_ALIAS]
    hint = (str(db.settings_dict["NAME"]), tenant, limit)
    if _MANY_ENDPOINTS.get(hint, 0.0) > time.monotonic():
        return None
    if db.vendor != "postgresql":
        found = list(_candidate_endpoints({tenant})[: limit + 1])
        return found if len(found) <= limit else None
    fields, rows = _candidate_rows(tenant, limit + 1)
    if len(rows) > limit:
        if len(_MANY_ENDPOINTS) >= MANY_ENDPOINTS_HINTS:
            _MANY_ENDPOINTS.clear()
        _MANY_ENDPOINTS[hint] = time.monotonic() + MANY_ENDPOINTS_HINT_SECONDS
        return None
    return _as_models(fields, rows, db)  # models only when few


@functools.cache
def _candidates_sql(named: bool, late: bool = False) -> tuple[list[Any], str]:
    """`_few_candidates`' fields, in the model's order (as `from_db` takes them), and its
    statement, for a named tenant or none (`late`: only the endpoints whose ids are not
    in a list, `_late_endpoint_exists`'s)."""
    fields = [field for field in Endpoint._meta.concrete_fields if field.name in _CANDIDATE_FIELDS]
    columns = {field.name: str(field.column) for field in Endpoint._meta.concrete_fields}

    def column(name: str) -> str:
        return connection.ops.quote_name(columns[name])

    sql = (
        f"SELECT {', '.join(column(field.name) for field in fields)} "  # noqa: S608 (ours)
        f"FROM {connection.ops.quote_name(Endpoint._meta.db_table)} "
        f"WHERE {column('tenant')} {'= %s' if named else 'IS NULL'} AND {column('state')} <> %s "
        + (f"AND NOT ({column('id')} = ANY(%s)) " if late else "")
        + f"ORDER BY {column('id')} LIMIT %s"
    )
    return fields, sql


def _late_endpoint_exists(tenant: str | None, read: list[Any]) -> bool:
    """Whether the tenant has a candidate endpoint other than those `read` (one created
    since they were read). On PostgreSQL one prepared statement, reading no row at all
    when nothing changed."""
    if connections[DEFAULT_DB_ALIAS].vendor != "postgresql":
        return _candidate_endpoints({tenant}).exclude(pk__in=read).exists()
    _, rows = _candidate_rows(tenant, 1, besides=read)
    return bool(rows)


def _candidate_rows(
    tenant: str | None, limit: int, *, besides: list[Any] | None = None
) -> tuple[list[Any], list[tuple[Any, ...]]]:
    """Up to `limit` of the tenant's candidate endpoints as rows (but those `besides`),
    and their fields: one prepared statement of ours (PostgreSQL)."""
    fields, sql = _candidates_sql(tenant is not None, late=besides is not None)
    params: list[Any] = [tenant] if tenant is not None else []
    params += [EndpointState.DISABLED, *([besides] if besides is not None else []), limit]
    with sql_cursor([Endpoint._meta.db_table]) as cursor:
        cursor.execute(sql, params)
        return fields, cursor.fetchall()


def _as_models(fields: list[Any], rows: list[tuple[Any, ...]], db: Any) -> list[Endpoint]:
    names = [field.attname for field in fields]
    return [
        Endpoint.from_db(
            db.alias,
            names,
            [_from_db(field, value, db) for field, value in zip(fields, row, strict=True)],
        )
        for row in rows
    ]


def _from_db(field: Any, value: Any, db: Any) -> Any:
    """A column's value as the model holds it (JSON is read as text, as Django reads it)."""
    from_db_value = getattr(field, "from_db_value", None)
    return value if from_db_value is None else from_db_value(value, None, db)


def _deliveries_of(event: Event, endpoints: list[Endpoint], now: datetime) -> list[Delivery]:
    # Only operational events need their data here; others may be offloaded and large.
    attributes = {"webhooks.event.id": str(event.pk), "webhooks.event.type": event.type}
    with tracing.span(
        "webhooks fan-out", traceparent=event.traceparent or None, attributes=attributes
    ) as span:
        deliveries = _matching(event, endpoints, now)
        tracing.set_attributes(span, {"webhooks.deliveries": len(deliveries)})
    return deliveries


def _matching(event: Event, endpoints: list[Endpoint], now: datetime) -> list[Delivery]:
    data = (
        payloads.load(event) if event.type in operational_events.OPERATIONAL_EVENT_TYPES else None
    )
    subscribers = subscriptions.Subscribers(event)
    return [
        new_delivery(
            event_id=event.pk,
            endpoint=endpoint,
            now=now,
            **ordering.delivery_fields(event, endpoint),
        )
        for endpoint in endpoints
        if subscribers.accepts(endpoint)
        and not operational_events.withheld(
            event_type=event.type,
            data=data,
            endpoint_id=endpoint.pk,
            endpoint_active=endpoint.state == EndpointState.ACTIVE,
        )
    ]
