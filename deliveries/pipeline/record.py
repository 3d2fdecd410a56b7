"""Writing back an owner's results: their attempts, each delivery's new state and the
endpoint's health, in one transaction, then the signals, metrics and logs. A retry
needs no message: the owner sends it when it falls due soon, else wakes the endpoint
with a countdown or leaves it to the sweeper (`owner`)."""

import json
import logging
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import (
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    OuterRef,
    Subquery,
    Value,
)
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from deliveries.breaker.transitions import circuit_transition, endpoints_record_attempts
from deliveries.destinations.http_client.transport import storable
from deliveries.endpoints.suspension import endpoint_suspend_automatically
from deliveries.models import Attempt, CircuitState, Delivery, DeliveryStatus, Endpoint
from deliveries.pipeline import attempt_report
from deliveries.pipeline.finished import on_delivery_outcome
from deliveries.pipeline.owner.outcomes import DeliveryOutcome
from webhooks_core.db.sql import sql_cursor
from webhooks_core.retry_policy import Decision, Verdict

logger = logging.getLogger(__name__)

# The retry window runs from the first request actually made in the current cycle (a
# manual retry starts a new one), not from a claim that found the endpoint suspended. The
# batch's attempts are inserted before the deliveries are updated, so this finds them.
_FIRST_ATTEMPT_OF_CYCLE = Coalesce(
    "first_attempt_at",
    Subquery(
        Attempt.objects.filter(
            delivery_id=OuterRef("pk"), number__gt=OuterRef("attempts_before_cycle")
        )
        .order_by("number")
        .values("started_at")[:1]
    ),
)


# An endpoint's `last_success_at` is kept to this precision: a busy endpoint's row is not
# rewritten by every batch.
LAST_SUCCESS_RESOLUTION_SECONDS = 1.0
# A batch recorded with more of its lease left than this skips re-reading which of its
# rows it still owns (the updates check the lease token anyway).
LEASE_MARGIN_SECONDS = 5.0


def due_in(seconds: float) -> ExpressionWrapper:
    """A due time `seconds` from now by the database's clock: the claims compare due
    times with it, and a worker's clock may be ahead of it or behind."""
    wait = Value(timedelta(seconds=seconds), output_field=DurationField())
    return ExpressionWrapper(Now() + wait, output_field=DateTimeField())


def _first_attempt_of_cycle(results: list["Result"]) -> Coalesce:
    starts = [r.attempt.started_at for r in results if r.attempt is not None]
    if len(starts) == len(results):
        # A row without a first attempt yet had it in this round: the round's first start
        # (its requests start within one request's time), without the subquery.
        return Coalesce("first_attempt_at", Value(min(starts)))
    return _FIRST_ATTEMPT_OF_CYCLE


@dataclass(frozen=True)
class DeliveryClaim:
    """Deliveries taken by one claim, ordered by endpoint, all under one lease token."""

    deliveries: list[Delivery]
    token: uuid.UUID
    now: datetime
    lease_expires_at: datetime


@dataclass(frozen=True)
class Result:
    """A delivery's decided outcome; `attempt` is None when no request was made."""

    delivery: Delivery
    decision: Decision
    status_code: int | None = None
    error: str = ""
    attempt: Attempt | None = None
    # The attempt failed on our side (an exception while preparing or sending it): it is
    # recorded and retried, but says nothing about the endpoint's health.
    local_failure: bool = False


def release_claim(
    claim: DeliveryClaim, deliveries: list[Delivery], *, status: str, **fields: object
) -> int:
    """Release claimed deliveries unsent, returning the attempt the claim counted (and
    setting `fields`); returns how many were still this claim's."""
    return Delivery.objects.filter(
        pk__in=[d.id for d in deliveries], lease_token=claim.token
    ).update(
        status=status,
        lease_token=None,
        lease_expires_at=None,
        attempts=F("attempts") - 1,
        updated_at=timezone.now(),
        **fields,
    )


@dataclass(frozen=True)
class Deferral:
    """Claimed deliveries not sent now and released without spending an attempt, due
    again after `seconds`."""

    deliveries: list[Delivery]
    seconds: float = 0.0


@dataclass(frozen=True)
class Round:
    """One owner's round to record: its claim, its endpoint as the owner read it, what
    its requests came to, and what it defers unsent."""

    claim: DeliveryClaim
    endpoint: Endpoint
    results: list[Result]
    deferral: Deferral


def record(
    claim: DeliveryClaim, endpoint: Endpoint, results: list[Result], deferral: Deferral
) -> dict[int, str]:
    """Record one endpoint's results and defer the deliveries that were not sent.

    Returns each delivery's outcome (`LEASE_LOST` where another worker took it over).
    """
    return record_rounds([Round(claim, endpoint, results, deferral)])[0]


def record_rounds(rounds: list[Round]) -> list[dict[int, str]]:
    """Record several owners' rounds in one transaction: one insert of all their attempts
    and one update of all their succeeded rows (each under its own claim's token); the
    rest (failures, health, deferrals) round by round. Returns each round's outcomes.

    Rows deleted meanwhile (their endpoint deleted while its requests were out) get no
    attempt and are `LEASE_LOST`, so that they fail no other round of the batch; one
    deleted after the insert fails the batch at its commit, and the group commit writes its
    rounds one by one."""
    now = timezone.now()
    outcomes: list[dict[int, str]] = [{} for _ in rounds]
    remembered: list[tuple[Endpoint, dict[str, Any]]] = []
    with transaction.atomic():
        owned = [_still_owned(r, now) for r in rounds]
        attempts = [
            result.attempt for r in rounds for result in r.results if result.attempt is not None
        ]
        gone = _insert_attempts(attempts)
        if gone:
            logger.info("deliveries deleted while sending; their results dropped: %s", gone)
            owned = [mine - gone for mine in owned]
        succeeded: list[tuple[DeliveryClaim, Result]] = []
        for r, mine, done in zip(rounds, owned, outcomes, strict=True):
            for result in r.results:
                delivery = result.delivery
                if delivery.id not in mine:
                    outcome = DeliveryOutcome.LEASE_LOST
                elif result.decision.verdict == Verdict.SUCCEEDED:
                    # The common case: one statement for all of them (`_record_successes`).
                    outcome = DeliveryOutcome.SUCCEEDED
                    succeeded.append((r.claim, result))
                else:
                    outcome = _record_failure(r.claim, result, now)
                done[delivery.id] = outcome
                on_delivery_outcome(delivery, outcome)
        _record_successes(succeeded, now)
        _record_round_effects(rounds, owned, remembered, gone)
        for r, done in zip(rounds, outcomes, strict=True):
            if r.deferral.deliveries:
                _defer(r.claim, r.deferral)
                done.update(
                    (delivery.id, DeliveryOutcome.DEFERRED) for delivery in r.deferral.deliveries
                )
    # The owners' copies of their endpoints as written, once it is: a batch that fails
    # is written again round by round, and must not count its failures twice.
    for endpoint, written in remembered:
        _remember(endpoint, written)
    for r, done in zip(rounds, outcomes, strict=True):
        for result in r.results:
            attempt_report.attempt_recorded(
                delivery=result.delivery,
                attempt=result.attempt,
                outcome=done[result.delivery.id],
                status_code=result.status_code,
                error=result.error,
            )
    return outcomes


def _insert_attempts(attempts: list[Attempt]) -> set[int]:
    """One insert of the rounds' attempts but those of rows deleted meanwhile; returns
    those rows' ids. On PostgreSQL a statement written once, which PostgreSQL prepares
    (the ORM's `bulk_create` compiled its insert anew each time), its rows passed as one
    JSON document (`_as_json`), the deliveries it wrote for read back."""
    if not attempts:
        return set()
    wanted = {a.delivery_id for a in attempts}
    if connection.vendor != "postgresql":
        there = set(Delivery.objects.filter(pk__in=wanted).values_list("pk", flat=True))
        Attempt.objects.bulk_create([a for a in attempts if a.delivery_id in there])
        return wanted - there
    rows = [
        {
            "delivery": a.delivery_id,
            "number": a.number,
            "started": a.started_at,
            "took": float(a.duration_ms),
            "headers": a.request_headers,
            "status": a.response_status,
            "body": storable(a.response_body),
            "error": storable(a.error),
        }
        for a in attempts
    ]
    with sql_cursor() as cursor:
        cursor.execute(_ATTEMPTS_SQL, [_as_json(rows)])
        return wanted - {row[0] for row in cursor.fetchall()}


def _as_json(rows: list[dict[str, Any]]) -> str:
    """Rows as one JSON document, for a statement of ours to read with `json_to_recordset`.
    Not one array per column: psycopg quotes each element of a text array in Python (a
    regular expression per string), most of the recording's work, where `json.dumps`
    writes the same rows in C. Text goes as UTF-8, as the arrays did; a NaN or an
    infinity is refused here (the JSON PostgreSQL reads has neither)."""
    return json.dumps(
        rows, separators=(",", ":"), default=_json_value, ensure_ascii=False, allow_nan=False
    )


def _json_value(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not written as JSON")


_ATTEMPTS_SQL = (
    f"INSERT INTO {Attempt._meta.db_table} (delivery_id, number, started_at, duration_ms, "  # noqa: S608 (names from the model)
    "request_headers, response_status, response_body, error) "
    "SELECT v.delivery, v.number, v.started, v.took, v.headers, v.status, v.body, v.error "
    "FROM json_to_recordset(%s::json) AS v(delivery bigint, number integer, "
    "started timestamptz, took double precision, headers jsonb, status integer, body text, "
    f"error text) WHERE EXISTS (SELECT 1 FROM {Delivery._meta.db_table} AS d "
    "WHERE d.id = v.delivery) RETURNING delivery_id"
)


def _still_owned(r: Round, now: datetime) -> set[int]:
    """The round's rows its claim still holds: all of them while its lease has a margin
    left (the updates check the token anyway), else as the database says, locked."""
    ids = {result.delivery.id for result in r.results}
    lease_left = (r.claim.lease_expires_at - now).total_seconds()
    if ids and lease_left < LEASE_MARGIN_SECONDS:
        # Another worker may have taken some over: write only the rows still ours.
        return set(
            Delivery.objects.select_for_update()
            .filter(pk__in=ids, lease_token=r.claim.token)
            .values_list("pk", flat=True)
        )
    return ids


def _record_successes(succeeded: list[tuple[DeliveryClaim, Result]], now: datetime) -> None:
    """Succeeded rows, each while it still carries its claim's token. On PostgreSQL one
    statement for all of them, whatever their claims (each row's first attempt of the
    cycle is this one when none is known yet); elsewhere one per claim and status code."""
    if not succeeded:
        return
    if connection.vendor == "postgresql" and all(r.attempt for _, r in succeeded):
        rows = []
        for claim, result in succeeded:
            assert result.attempt is not None
            rows.append(
                {
                    "id": result.delivery.id,
                    "token": claim.token,
                    "code": result.status_code,
                    "started": result.attempt.started_at,
                }
            )
        ids = [row["id"] for row in rows]
        with sql_cursor([Delivery._meta.db_table]) as cursor:
            cursor.execute(
                _SUCCESSES_SQL, [DeliveryStatus.SUCCEEDED, now, now, _as_json(rows), ids]
            )
        return
    groups: dict[tuple[uuid.UUID, int | None], list[Result]] = defaultdict(list)
    for claim, result in succeeded:
        groups[(claim.token, result.status_code)].append(result)
    for (token, status_code), done in groups.items():
        Delivery.objects.filter(pk__in=[r.delivery.id for r in done], lease_token=token).update(
            status=DeliveryStatus.SUCCEEDED,
            lease_token=None,
            lease_expires_at=None,
            last_status_code=status_code,
            last_error="",
            updated_at=now,
            completed_at=now,
            next_attempt_at=None,
            first_attempt_at=_first_attempt_of_cycle(done),
        )


_SUCCESSES_SQL = (
    f"UPDATE {Delivery._meta.db_table} AS d SET status = %s, lease_token = NULL, "  # noqa: S608 (names from the model)
    "lease_expires_at = NULL, last_status_code = v.code, last_error = '', updated_at = %s, "
    "completed_at = %s, next_attempt_at = NULL, "
    "first_attempt_at = COALESCE(d.first_attempt_at, v.started) "
    "FROM json_to_recordset(%s::json) AS v(id bigint, token uuid, code integer, "
    "started timestamptz) WHERE d.id = ANY(%s::bigint[]) AND d.id = v.id "
    "AND d.lease_token = v.token"
)
# (The ids again, as an array: PostgreSQL estimates a JSON record set's rows without
# reading it, and joined the deliveries table to it by reading the whole table; `= ANY`
# of the ids goes by the primary key.)


def _record_round_effects(
    rounds: list[Round],
    owned: list[set[int]],
    remembered: list[tuple[Endpoint, dict[str, Any]]],
    gone: set[int],
) -> None:
    """The endpoints' health after their rounds' requests (`_record_endpoints_health`),
    a half-open probe that failed on our side, a suspension after a 410. Rows `gone`
    (deleted meanwhile, with their endpoint) count for nothing."""
    sent_by_round = [
        (
            r.endpoint,
            [
                x
                for x in r.results
                if x.attempt is not None and not x.local_failure and x.delivery.id not in gone
            ],
        )
        for r in rounds
    ]
    _record_endpoints_health(
        [(endpoint, sent) for endpoint, sent in sent_by_round if sent], remembered
    )
    for r, mine, (endpoint, sent) in zip(rounds, owned, sent_by_round, strict=True):
        if not sent and endpoint.circuit_state == CircuitState.HALF_OPEN and r.results:
            # The probe failed on our side: nothing was learnt of the endpoint, so the
            # circuit goes back to open and a later probe tries again.
            circuit_transition(
                endpoint_id=endpoint.pk,
                from_state=CircuitState.HALF_OPEN,
                to_state=CircuitState.OPEN,
                reason="the probe was not sent (an error on our side)",
            )
        told_gone = next((x for x in r.results if x.decision.suspend_endpoint), None)
        if told_gone is not None and told_gone.delivery.id in mine:
            endpoint_suspend_automatically(
                endpoint_id=endpoint.pk,
                reason=f"endpoint answered {told_gone.status_code} (Gone)",
            )


def _record_failure(claim: DeliveryClaim, result: Result, now: datetime) -> str:
    """Record a retry or a dead letter; returns the outcome."""
    decision = result.decision
    reason = f" ({decision.reason})" if decision.reason else ""
    fields: dict[str, object] = {
        "lease_token": None,
        "lease_expires_at": None,
        "last_status_code": result.status_code,
        "last_error": f"{result.error}{reason}"[:2000],
        "updated_at": now,
    }
    if result.attempt is not None:
        fields["first_attempt_at"] = _first_attempt_of_cycle([result])
    if decision.verdict == Verdict.RETRY:
        fields.update(
            status=DeliveryStatus.PENDING,
            next_attempt_at=due_in(decision.delay_seconds),
        )
        outcome = DeliveryOutcome.RETRY_SCHEDULED
    else:
        fields.update(status=DeliveryStatus.DEAD_LETTERED, completed_at=now, next_attempt_at=None)
        outcome = DeliveryOutcome.DEAD_LETTERED
    updated = Delivery.objects.filter(pk=result.delivery.id, lease_token=claim.token).update(
        **fields
    )
    return outcome if updated else DeliveryOutcome.LEASE_LOST


def _record_endpoints_health(
    rounds: list[tuple[Endpoint, list[Result]]],
    remembered: list[tuple[Endpoint, dict[str, Any]]] | None = None,
) -> None:
    """Count each endpoint's consecutive failures (those after its last success) and move
    its breaker; per endpoint, the results of its round with a request, in the order they
    were made. Endpoints whose round ended in a success get the same write: one statement
    for all of them. What the owners' copies are to `_remember` goes to `remembered`, for
    after the commit (None: at once)."""
    if remembered is None:
        later: list[tuple[Endpoint, dict[str, Any]]] = []
        _record_endpoints_health(rounds, later)
        for endpoint, change in later:
            _remember(endpoint, change)
        return
    now = timezone.now()
    ended_well: list[Endpoint] = []
    counts: list[tuple[Endpoint, int, int]] = []
    for endpoint, sent in rounds:
        succeeded = [r.decision.verdict == Verdict.SUCCEEDED for r in sent]
        failures = succeeded.count(False)
        counts.append((endpoint, len(sent), failures))
        recently = endpoint.last_success_at is not None and (
            now - endpoint.last_success_at
        ) < timedelta(seconds=LAST_SUCCESS_RESOLUTION_SECONDS)
        if not failures and not endpoint.consecutive_failures and recently:
            continue  # nothing worth a write to a row that every round of the endpoint touches
        if succeeded[-1]:
            ended_well.append(endpoint)
        elif True in succeeded:
            trailing = succeeded[::-1].index(True)
            written: dict[str, Any] = {
                "consecutive_failures": trailing,
                "last_success_at": now,
                "failing_since": now,
                "last_failure_at": now,
            }
            Endpoint.objects.filter(pk=endpoint.pk).update(**written)
            remembered.append((endpoint, written))
        else:
            Endpoint.objects.filter(pk=endpoint.pk).update(
                consecutive_failures=F("consecutive_failures") + failures,
                last_failure_at=now,
                failing_since=Coalesce("failing_since", Value(now)),
            )
            remembered.append(
                (
                    endpoint,
                    {
                        "consecutive_failures": endpoint.consecutive_failures + failures,
                        "last_failure_at": now,
                        "failing_since": endpoint.failing_since or now,
                    },
                )
            )
    if ended_well:
        healthy = {"consecutive_failures": 0, "last_success_at": now, "failing_since": None}
        Endpoint.objects.filter(pk__in=[e.pk for e in ended_well]).update(**healthy)
        remembered.extend((endpoint, healthy) for endpoint in ended_well)
    endpoints_record_attempts(counts)


def _remember(endpoint: Endpoint, written: dict[str, Any]) -> None:
    """Keep the owner's copy of the endpoint as just written, so that its next round
    judges "written recently" by our own write (else every round after the first second
    would write the row again)."""
    for name, value in written.items():
        setattr(endpoint, name, value)


def _defer(claim: DeliveryClaim, deferral: Deferral) -> None:
    """Release claimed deliveries without spending an attempt, due after `seconds`; their
    owner (or the next) sends them then."""
    release_claim(
        claim,
        deferral.deliveries,
        status=DeliveryStatus.PENDING,
        next_attempt_at=due_in(deferral.seconds),
    )
