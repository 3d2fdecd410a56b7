"""Attempting deliveries: claim a batch, send its requests, record the outcomes.

A task message names a few deliveries. The claim is one conditional UPDATE for all of them,
so of two messages naming the same delivery (a duplicate from the broker, a sweeper
re-enqueue) only one sends it; the other finds nothing to claim. The lease token written
by the claim guards the write-back: a worker whose lease expired and was taken over cannot
overwrite the newer outcome.

A batch's deliveries to one endpoint pass the admission gate once and take up to the
endpoint's in-flight limit of slots; that many requests go out at once (each over a
kept-alive connection), and the batch is recorded in one transaction (see `recording`): a
handful of statements per batch, not ten per delivery. While every request of a batch
succeeds and its time budget lasts, the batch keeps its slots and claims the endpoint's
next due deliveries, so a backlog (and the deliveries refused a slot meanwhile, which
stay due) flows through the slots without waiting for a countdown.

No database connection is held while requests are out when the connections are pooled
(`DATABASES[...]["OPTIONS"]["pool"]`): hundreds of requests in flight in one gevent worker
share a few connections.
"""

import functools
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from itertools import groupby
from typing import Any
from uuid import UUID

from django.db import connection, models, transaction
from django.db.models import Q
from django.utils import timezone

from webhooks_core import crypto, jobs

from .. import conf, ordering, payloads, tracing, transport
from ..models import Attempt, Delivery, DeliveryStatus, Endpoint, EndpointState
from ..retry_policy import Decision, Verdict, decide
from .admission import Admission, endpoint_admit, endpoint_busy_wait
from .dispatch import enqueue_deliveries
from .recording import Claim, Deferral, Outcome, Result, record, release_claim
from .wire import build_headers, redact_headers, render_body, signing_keys

logger = logging.getLogger(__name__)

__all__ = [
    "Claim",
    "DeliveryNotRetryable",
    "Outcome",
    "build_headers",
    "deliveries_attempt",
    "deliveries_busy_wait",
    "deliveries_claim",
    "deliveries_defer_if_busy",
    "delivery_attempt",
    "delivery_retry",
    "render_body",
]


def _due() -> Q:
    return jobs.claimable(
        waiting=[DeliveryStatus.PENDING], busy=DeliveryStatus.SENDING, now=timezone.now()
    )


def _lease(now: datetime) -> tuple[uuid.UUID, dict[str, Any]]:
    return jobs.lease(busy=DeliveryStatus.SENDING, now=now, seconds=conf.get().lease_seconds)


def _new_claim(deliveries: list[Delivery], token: uuid.UUID, now: datetime) -> Claim:
    lease = timedelta(seconds=conf.get().lease_seconds)
    return Claim(deliveries=deliveries, token=token, now=now, lease_expires_at=now + lease)


def deliveries_claim(*, delivery_ids: Collection[int], top_up: bool = False) -> Claim:
    """Take the due rows among these for this worker; the others are not due or taken.

    With `top_up` (the message waited in a backlog), the batch is filled up with other
    due deliveries of its endpoint: under load, many small messages become a few full
    batches, and the messages of the deliveries taken here find nothing left to claim.
    """
    now = timezone.now()
    token, taken = _lease(now)
    ids = sorted(set(delivery_ids))
    claimed = _claim_unordered(ids, token, now, taken["lease_expires_at"])
    if len(claimed) < len(ids) and _any_ordered([i for i in ids if i not in claimed]):
        ordered = _due() & Q(ordering_key__isnull=False) & ordering.claimable_in_order()
        if Delivery.objects.filter(ordered, pk__in=ids).update(**taken):
            claimed.add(0)
    deliveries = _claimed(ids, token) if claimed else []
    room = conf.get().batch_size - len(deliveries)
    if top_up and deliveries and room > 0:
        extra = _claim_due_of(deliveries[0].endpoint_id, room, token, taken, now)
        if extra:
            deliveries = sorted(deliveries + extra, key=lambda d: (str(d.endpoint_id), d.pk))
    return _new_claim(deliveries, token, now)


def _claim_unordered(
    ids: list[int], token: uuid.UUID, now: datetime, lease_expires_at: datetime
) -> set[int]:
    """Claim the due deliveries without an ordering key among these; returns their ids.

    Every task message starts here, and many find their rows already taken by a batch
    that took them along: one statement whose SQL is built once per batch size, not an
    ORM query compiled for each message (which cost several times the statement itself).
    """
    if not ids:
        return set()
    values: list[Any] = [
        DeliveryStatus.SENDING,
        _db("lease_token", token),
        _db("lease_expires_at", lease_expires_at),
        _db("updated_at", now),
        *ids,
        DeliveryStatus.PENDING,
        _db("next_attempt_at", now),
        DeliveryStatus.SENDING,
        _db("lease_expires_at", now),
    ]
    with connection.cursor() as cursor:
        cursor.execute(_claim_sql(len(ids)), values)
        return {row[0] for row in cursor.fetchall()}


@functools.cache
def _claim_sql(count: int) -> str:
    """The rule of `jobs.claimable` (due and waiting, or busy with an expired lease) and
    the fields of `jobs.lease`, for rows without an ordering key (a test holds the two
    to the same answers). Plain SQL for PostgreSQL and SQLite alike."""
    table = Delivery._meta.db_table
    placeholders = ", ".join(["%s"] * count)
    return (
        f"UPDATE {table} SET status = %s, lease_token = %s, lease_expires_at = %s, "  # noqa: S608
        f"attempts = attempts + 1, updated_at = %s "
        f"WHERE id IN ({placeholders}) AND ordering_key IS NULL "
        f"AND ((status = %s AND next_attempt_at <= %s) OR (status = %s AND lease_expires_at < %s)) "
        f"RETURNING id"
    )


def _any_ordered(ids: list[int]) -> bool:
    """Whether some of these have an ordering key (their claim needs the ORM's subqueries)."""
    if not ids:
        return False
    placeholders = ", ".join(["%s"] * len(ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {Delivery._meta.db_table} "  # noqa: S608 (only placeholders)
            f"WHERE id IN ({placeholders}) AND ordering_key IS NOT NULL LIMIT 1",
            ids,
        )
        return cursor.fetchone() is not None


def _db(field_name: str, value: object) -> Any:
    """A value as the column stores it (SQLite keeps UUIDs and datetimes as text)."""
    field = Delivery._meta.get_field(field_name)
    assert isinstance(field, models.Field)
    return field.get_db_prep_value(value, connection)


def _claim_due_of(
    endpoint_id: UUID, room: int, token: uuid.UUID, taken: dict[str, Any], now: datetime
) -> list[Delivery]:
    """Claim up to `room` other due deliveries of the endpoint that have a task message
    out (that message then finds nothing left); ordered ones keep to their own line."""
    extra = _due_unordered(endpoint_id, now, room)
    if extra and Delivery.objects.filter(_due(), pk__in=extra).update(**taken):
        return _claimed(extra, token)
    return []


def _due_unordered(endpoint_id: UUID, now: datetime, limit: int) -> list[int]:
    """Up to `limit` of the endpoint's due deliveries without an ordering key that have
    had a task message, oldest due first: the ones a batch takes along or hands on."""
    due = Delivery.objects.filter(
        status=DeliveryStatus.PENDING,
        next_attempt_at__lte=now,
        endpoint_id=endpoint_id,
        ordering_key__isnull=True,
        enqueued_at__isnull=False,
    ).order_by("next_attempt_at")
    return list(due.values_list("pk", flat=True)[:limit])


def _claimed(ids: list[int], token: uuid.UUID) -> list[Delivery]:
    deliveries = list(
        Delivery.objects.select_related("event", "endpoint")
        .filter(pk__in=ids, lease_token=token)
        .order_by("endpoint_id", "pk")
    )
    # One instance per endpoint, not one per row: a batch shares its endpoint.
    endpoints: dict[UUID, Endpoint] = {}
    for delivery in deliveries:
        delivery.endpoint = endpoints.setdefault(delivery.endpoint_id, delivery.endpoint)
    return deliveries


def deliveries_defer_if_busy(*, delivery_ids: Collection[int]) -> bool:
    """Before any claim: True when every in-flight slot of the batch's endpoint is taken,
    and the message should end. Its rows stay due, untouched, for the batch holding a slot
    to take along or hand on; ordered ones, which keep to their line and are not taken
    along, get their message back after about as long as a slot takes to free."""
    wait = deliveries_busy_wait(delivery_ids=delivery_ids)
    if not wait:
        return False
    ids = sorted(set(delivery_ids))
    if _any_ordered(ids):
        enqueue_deliveries(ids, countdown=wait, one_endpoint=True)
    return True


def deliveries_busy_wait(*, delivery_ids: Collection[int]) -> float:
    """How long a batch's message should wait before claiming: its endpoint's in-flight
    slots are all taken (see `endpoint_busy_wait`); 0 to go ahead."""
    # Every message asks this first: plain SQL, not an ORM query compiled every time.
    with connection.cursor() as cursor:
        cursor.execute(_ENDPOINT_LIMIT_SQL, [min(delivery_ids)])
        row = cursor.fetchone()
    if row is None:
        return 0.0
    endpoint_id = Delivery._meta.get_field("endpoint").to_python(row[0])
    return endpoint_busy_wait(endpoint_id=endpoint_id, max_in_flight=row[1])


_ENDPOINT_LIMIT_SQL = (
    f"SELECT e.id, e.max_in_flight FROM {Delivery._meta.db_table} d "  # noqa: S608
    f"JOIN {Endpoint._meta.db_table} e ON e.id = d.endpoint_id WHERE d.id = %s"
)


def delivery_attempt(*, delivery_id: int) -> str:
    """Run one attempt of a delivery if it can be claimed. Returns an `Outcome` string."""
    outcomes = deliveries_attempt(delivery_ids=[delivery_id])
    return outcomes.get(delivery_id, Outcome.NOT_CLAIMED)


def deliveries_attempt(*, delivery_ids: Collection[int], top_up: bool = False) -> dict[int, str]:
    """Attempt every claimable delivery among these (and, with `top_up`, other due ones
    of the same endpoint); returns each claimed one's outcome."""
    claim = deliveries_claim(delivery_ids=delivery_ids, top_up=top_up)
    outcomes: dict[int, str] = {}
    for _, group in groupby(claim.deliveries, key=lambda delivery: delivery.endpoint_id):
        outcomes.update(_attempt_group(claim, list(group)))
    return outcomes


def _attempt_group(claim: Claim, group: list[Delivery]) -> dict[int, str]:
    """The claimed deliveries of one endpoint, then, while the batch goes well, the
    endpoint's next due ones through the same slots."""
    endpoint = group[0].endpoint
    if endpoint.state != EndpointState.ACTIVE:
        release_claim(claim, group, status=DeliveryStatus.HELD)
        return {delivery.pk: Outcome.HELD for delivery in group}
    results, waiting = _exhausted(group)
    if not waiting:
        return record(claim, endpoint, results, Deferral([]))
    settings = conf.get()
    # New requests start only while the batch's lease is safe: the last one may still take
    # its full timeouts, and an expired lease would let another worker send them again.
    request_seconds = endpoint.connect_timeout_seconds + endpoint.read_timeout_seconds
    budget = min(settings.batch_seconds, settings.lease_seconds / 2 - request_seconds)
    # A lease too short for more than the first request: take one slot, not all of them,
    # so the endpoint's other batches are not refused for slots this one cannot use.
    wanted = len(waiting) if budget > 0 else 1
    # Before any costly work: a refused batch is deferred cheaply, spending no attempt.
    admission = endpoint_admit(endpoint=endpoint, token=claim.token, wanted=wanted)
    if not admission.admitted:
        deferral = Deferral(
            waiting,
            admission.retry_in_seconds,
            to_sweeper=admission.to_sweeper,
            due_now=admission.due_now,
        )
        return record(claim, endpoint, results, deferral)
    deadline = time.monotonic() + budget
    outcomes: dict[int, str] = {}
    try:
        while True:
            # Each round reads them: a secret may have expired (or been rotated) meanwhile.
            try:
                secrets = [secret.value for secret in endpoint.secrets.unexpired(claim.now)]
            except Exception as exc:
                failed = [_local_failure(claim, d, exc) for d in waiting]
                outcomes.update(record(claim, endpoint, results + failed, Deferral([])))
                return outcomes
            try:
                sent, deferral = _send(claim, waiting, admission, secrets, deadline)
            except Exception as exc:
                # Before any request went out (each request has its own guard): no
                # delivery of the batch may stay `sending` and crash again on every lease.
                sent = [_local_failure(claim, d, exc, secrets) for d in waiting]
                deferral = Deferral([])
            outcomes.update(record(claim, endpoint, results + sent, deferral))
            going_well = sent and all(r.decision.verdict == Verdict.SUCCEEDED for r in sent)
            if deferral.deliveries or not going_well or admission.share < 1 or admission.probe:
                return outcomes
            if time.monotonic() > deadline:
                return outcomes
            now = timezone.now()
            token, taken = _lease(now)
            more = _claim_due_of(endpoint.pk, settings.batch_size, token, taken, now)
            if not more:
                return outcomes
            for delivery in more:
                delivery.endpoint = endpoint
            claim = _new_claim(more, token, now)
            results, waiting = _exhausted(more)
            if not waiting:
                outcomes.update(record(claim, endpoint, results, Deferral([])))
                return outcomes
            admission.grow(len(waiting))
    finally:
        held_slots = admission.holds_slots
        admission.release()
        if held_slots:
            _hand_over_safely(endpoint.pk)


def _hand_over_safely(endpoint_id: UUID) -> None:
    try:
        _hand_over(endpoint_id)
    except Exception:
        # Never instead of the batch's own outcome or error; the sweeper covers the rows.
        logger.exception("handing over an endpoint's due deliveries failed")


def _hand_over(endpoint_id: UUID) -> None:
    """Once a batch has freed its slots: a message for the endpoint's due deliveries, if
    any. Messages that found every slot taken left their rows due for the batches holding
    the slots, and each of those looks here after freeing its own, so no row waits for
    the sweeper; behind the other endpoints' messages, so a busy endpoint takes turns."""
    ids = _due_unordered(endpoint_id, timezone.now(), conf.get().batch_size)
    if ids:
        enqueue_deliveries(ids, one_endpoint=True)


def _exhausted(group: list[Delivery]) -> tuple[list[Result], list[Delivery]]:
    """Dead letters for deliveries whose attempts ran out while workers died during them
    (leases expired), and the others."""
    endpoint = group[0].endpoint
    results: list[Result] = []
    waiting: list[Delivery] = []
    for delivery in group:
        if delivery.attempts_in_cycle > endpoint.max_attempts:
            decision = Decision(Verdict.DEAD_LETTER, reason="attempts exhausted (worker lost)")
            results.append(Result(delivery, decision, error="worker lost during the last attempt"))
        else:
            waiting.append(delivery)
    return results, waiting


def _release_database_connection() -> None:
    """Give a pooled connection back to the pool for as long as requests are out (the
    write-back takes one again); an unpooled one is kept, as reconnecting costs more."""
    if getattr(connection, "pool", None) is not None and not connection.in_atomic_block:
        connection.close()


def _send(
    claim: Claim,
    waiting: list[Delivery],
    admission: Admission,
    secrets: list[str],
    deadline: float,
) -> tuple[list[Result], Deferral]:
    """Send the deliveries, `admission.lanes` requests at a time, while the gate, the
    time budget and the endpoint allow; returns the results (in the order the requests
    ended) and the deliveries deferred."""
    if not secrets:
        decision = Decision(Verdict.DEAD_LETTER, reason="endpoint has no unexpired secret")
        error = "no unexpired signing secret"
        return [Result(delivery, decision, error=error) for delivery in waiting], Deferral([])
    endpoint = waiting[0].endpoint
    private_keys = signing_keys(endpoint, claim.now)
    if private_keys is None:
        decision = Decision(Verdict.DEAD_LETTER, reason="endpoint has no unexpired signing key")
        error = "no unexpired v1a signing key"
        return [Result(delivery, decision, error=error) for delivery in waiting], Deferral([])
    allowed = admission.how_many(len(waiting))
    queue = deque(waiting[:allowed])
    held_back = waiting[allowed:]
    request_seconds = endpoint.connect_timeout_seconds + endpoint.read_timeout_seconds
    lock = threading.Lock()
    results: list[Result] = []
    # Seconds the rest waits once a lane stopped (a rate limit, no answer, the budget).
    stopped: list[float] = []
    first = [True]

    def lane() -> None:
        while True:
            with lock:
                if stopped or not queue:
                    return
                if not first[0] and time.monotonic() > deadline:
                    # Other endpoints' batches wait for this worker: the rest to a new task.
                    stopped.append(0.0)
                    return
                delivery = queue.popleft()
                # The admission took the first request from the rate limits.
                rate_limited, first[0] = not first[0], False
            if rate_limited:
                wait = admission.next_request_wait()
                if wait:
                    with lock:
                        queue.appendleft(delivery)
                        stopped.append(wait)
                    return
            try:
                result = _send_one(claim, delivery, secrets, private_keys)
            except Exception as exc:
                result = _local_failure(claim, delivery, exc, [*secrets, *private_keys])
            with lock:
                results.append(result)
                if (
                    result.attempt is not None
                    and result.status_code is None
                    and not result.local_failure
                ):
                    # No answer at all (timeout, refused): the others would most likely
                    # wait as long for nothing. They are deferred for about as long as
                    # such a request takes (sooner, they would only meet the same
                    # in-flight requests), and to the breaker's judgement.
                    stopped.append(max(conf.health().defer_seconds, request_seconds))
                    return

    _release_database_connection()
    _run_lanes(lane, min(admission.lanes, len(queue)))
    if held_back:
        # Behind a probe they wait for its verdict in the database.
        rest = list(queue) + held_back
        return results, Deferral(rest, admission.rest_wait_seconds, to_sweeper=admission.probe)
    return results, Deferral(list(queue), max(stopped, default=0.0))


def _run_lanes(lane: Callable[[], None], count: int) -> None:
    """Run `lane` `count` times at once: in threads, which are greenlets in a gevent
    worker (Celery's gevent pool patches `threading`); one lane runs in this thread."""
    others = [threading.Thread(target=lane, daemon=True) for _ in range(count - 1)]
    for thread in others:
        thread.start()
    lane()
    for thread in others:
        thread.join()


def _send_one(
    claim: Claim, delivery: Delivery, secrets: list[str], private_keys: list[str]
) -> Result:
    """One attempt, in an HTTP client span when tracing is on (see `tracing`)."""
    with tracing.span(
        "POST",
        kind="CLIENT",
        traceparent=delivery.event.traceparent or None,
        attributes=tracing.attempt_attributes(
            url=delivery.endpoint.url,
            attempt=delivery.attempts,
            delivery_id=delivery.pk,
            endpoint_id=str(delivery.endpoint_id),
            event_id=str(delivery.event_id),
            event_type=delivery.event.type,
        ),
    ) as span:
        result = _send_untraced(claim, delivery, secrets, private_keys, span)
        tracing.attempt_outcome(
            span,
            status_code=result.status_code,
            outcome=result.decision.verdict,
            error=result.error,
        )
        return result


def _send_untraced(
    claim: Claim, delivery: Delivery, secrets: list[str], private_keys: list[str], span: object
) -> Result:
    endpoint = delivery.endpoint
    try:
        body = render_body(delivery.event, endpoint)
    except payloads.PayloadUnavailable as exc:
        # Our storage, not the endpoint, failed: no request, no health penalty; the
        # delivery retries on its usual backoff and shows the error.
        decision = decide(
            policy=endpoint.retry_policy,
            attempt_number=delivery.attempts_in_cycle,
            status_code=None,
            retry_after=None,
            first_attempt_at=delivery.first_attempt_at or claim.now,
            now=timezone.now(),
        )
        return Result(delivery, decision, error=str(exc))
    headers = build_headers(
        delivery, body, secrets, timestamp=int(claim.now.timestamp()), private_keys=private_keys
    )
    traced = tracing.traceparent_of(span)
    if traced:
        # The receiver's span becomes a child of this attempt (same trace as the event).
        headers["traceparent"] = traced
    started_at = timezone.now()
    response = transport.post(
        endpoint.url,
        body,
        headers,
        connect_timeout=endpoint.connect_timeout_seconds,
        read_timeout=endpoint.read_timeout_seconds,
        excerpt_limit=conf.get().response_body_limit,
        policy=conf.address_policy(),
    )
    decision = decide(
        policy=endpoint.retry_policy,
        attempt_number=delivery.attempts_in_cycle,
        status_code=response.status_code,
        retry_after=response.retry_after,
        first_attempt_at=delivery.first_attempt_at or started_at,
        now=timezone.now(),
    )
    # `requests` quotes a refused header value in its message: never store a secret one.
    network_error = _without_secrets(response.error, delivery, secrets) if response.error else ""
    attempt = Attempt(
        delivery_id=delivery.pk,
        number=delivery.attempts,
        started_at=started_at,
        duration_ms=response.duration_ms,
        request_headers=redact_headers(headers, endpoint.secret_header_names),
        response_status=response.status_code,
        response_body=response.body_excerpt,
        error=network_error,
    )
    error = network_error or (
        f"HTTP {response.status_code}" if decision.verdict != Verdict.SUCCEEDED else ""
    )
    return Result(
        delivery, decision, status_code=response.status_code, error=error, attempt=attempt
    )


def _local_failure(
    claim: Claim, delivery: Delivery, exc: Exception, secrets: Collection[str] = ()
) -> Result:
    """An exception while preparing or sending one delivery, as a failed attempt of it:
    recorded with the error text and retried by the endpoint's policy like any failure."""
    now = timezone.now()
    # The exception's type and message only, and with any secret value it may quote
    # (`requests` names a bad header value in its message) cut out: the text goes into
    # the attempt row and the log line.
    error = _without_secrets(
        f"not sent, error on our side: {type(exc).__name__}: {exc}", delivery, secrets
    )[:1000]
    logger.error(
        "sending a delivery failed",
        extra={"delivery": delivery.pk, "endpoint": str(delivery.endpoint_id), "error": error},
    )
    decision = decide(
        policy=delivery.endpoint.retry_policy,
        attempt_number=delivery.attempts_in_cycle,
        status_code=None,
        retry_after=None,
        first_attempt_at=delivery.first_attempt_at or claim.now,
        now=now,
    )
    attempt = Attempt(
        delivery_id=delivery.pk,
        number=delivery.attempts,
        started_at=now,
        duration_ms=0,
        request_headers={},
        response_status=None,
        response_body="",
        error=error,
    )
    return Result(delivery, decision, error=error, attempt=attempt, local_failure=True)


def _without_secrets(text: str, delivery: Delivery, secrets: Collection[str]) -> str:
    endpoint = delivery.endpoint
    hidden = list(secrets)
    try:
        plain = endpoint.custom_headers_plain()
    except crypto.SecretDecryptionError:
        plain = {}  # an undecryptable header: nothing of it to quote
    hidden += [plain[name] for name in endpoint.secret_header_names if name in plain]
    for value in sorted(filter(None, hidden), key=len, reverse=True):
        for form in (value, repr(value)[1:-1]):
            text = text.replace(form, "[redacted]")
    return text


class DeliveryNotRetryable(Exception):
    """The delivery is in flight, held or already delivered; a retry would not be right."""


#: Why a succeeded delivery is not retried (the API answers it with 409).
ALREADY_DELIVERED = (
    "delivery already succeeded; to send a delivered event again, create a replay "
    "(POST /api/v1/replays, or Replays in the admin)"
)


def delivery_retry(*, delivery_id: int) -> Delivery:
    """Send a delivery again now, with a fresh retry cycle (operator or API action).

    Works for dead-lettered, cancelled and pending deliveries; the request goes through
    the same claim, signing and backoff path as any other. A succeeded delivery is not
    sent again by a retry (a double click or a scripted retry would re-deliver on
    purpose-less grounds): a replay is the explicit, recorded way to do that.
    """
    now = timezone.now()
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update(of=("self",))
            .select_related("endpoint")
            .get(pk=delivery_id)
        )
        if delivery.status == DeliveryStatus.SUCCEEDED:
            raise DeliveryNotRetryable(ALREADY_DELIVERED)
        if delivery.status in (DeliveryStatus.SENDING, DeliveryStatus.HELD):
            raise DeliveryNotRetryable(f"delivery is {delivery.status}")
        if delivery.endpoint.state != EndpointState.ACTIVE:
            raise DeliveryNotRetryable(f"endpoint is {delivery.endpoint.state}")
        delivery.status = DeliveryStatus.PENDING
        delivery.attempts_before_cycle = delivery.attempts
        delivery.first_attempt_at = None
        delivery.completed_at = None
        delivery.next_attempt_at = now
        delivery.enqueued_at = now
        delivery.save()
        transaction.on_commit(lambda: enqueue_deliveries([delivery.pk]), robust=True)
    return delivery
