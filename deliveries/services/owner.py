"""The owner of an endpoint: the one worker that sends its requests for now.

A task message says only "endpoint E has work". The worker that runs it takes E's lease
(`ownership`) or, when another owner holds it, ends at once: that owner looks at the
database again before it stops. The owner then works in rounds:

1. renew its lease when a third of it has passed (the rows it sends share it);
2. read the endpoint again (a disable, a rotated header or a new URL applies now);
3. ask the gate (`admission`) how many requests may be open, claim at most that many due
   rows minus those in flight (`claims`), and start each in a lane of its own, once the
   rate limits let it, within the process's cap on open requests (`lanes`);
4. wait for a lane to finish, and record what finished (`recording`) in one transaction,
   written together with other owners' rounds that end meanwhile (`recorder`); a round
   whose requests all succeeded is recorded just after the next round's requests start.

When nothing is due and nothing in flight it stops: it clears its wake mark, releases the
lease, then looks once more, so a wake that came in between is never lost (it takes the
lease back, or the wake's own message does). A retry falling due within a second is
waited for; a later one gets a countdown wake (or, past the countdown bound, the
sweeper's). After its turn (`WEBHOOKS_DELIVERY_BATCH_SECONDS`) an owner finishes its
requests and hands the endpoint on, behind the other endpoints' messages, when one of them
waits for a slot of the worker's pool; while none does, its turn goes on (a hand-on would
only cost the next turn's set-up), for `MAX_TURN_SECONDS` at most.

Every request ends by its deadline (`deadlines`): connect + read timeout in total. An owner
that cannot renew its lease stops claiming and cuts its open requests short before the
lease ends, so no request outlives its claim and no two owners send to one endpoint.
"""

import contextlib
import copy
import logging
import math
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from uuid import UUID

import redis
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from webhooks_core.cooperative import start_beside

from .. import conf, deadlines, destinations, metrics
from ..destinations import Credentials, Kind, Outcome
from ..headers import MASK
from ..models import Attempt, CircuitState, Delivery, DeliveryStatus, Endpoint, EndpointState
from ..retry_policy import Decision, Verdict, decide
from ..wire import signing_keys, uses_signing_keys
from .admission import Gate, endpoint_gate, rate_limit_wait
from .claims import (
    claim_due,
    claim_round,
    endpoint_state,
    endpoint_version,
    has_due,
    next_due_in,
)
from .connections import connections_pooled, give_back_pooled_connection
from .dispatch import dispatch_wakes, wake_book
from .known_endpoints import KnownEndpoint, forget_endpoint, recall_endpoint, remember_endpoint
from .lanes import acquire, release, tasks_wait_for_a_slot, try_acquire
from .outcomes import DeliveryOutcome
from .ownership import lease_seconds, owner_release, owner_renew, owner_take
from .recorder import record_round
from .recording import Deferral, DeliveryClaim, Result, Round
from .validation import ready as validation_ready

logger = logging.getLogger(__name__)

# A row falling due this soon is waited for by its owner rather than woken for later
# (never longer than a countdown may wait: longer waits belong to the database).
LINGER_SECONDS = 1.0
# An endpoint read this recently is not read again for the next round: a change (a
# disable, a new header) applies from the next request that starts later than this.
FRESH_SECONDS = 0.05
# Where the claim itself checks the endpoint's version (an unordered endpoint on
# PostgreSQL), the owner reads the endpoint again only when its version changed, or
# after this long (a net, not the rule: any change is seen by the next claim).
VERSIONED_FRESH_SECONDS = 30.0
# How often an owner whose lanes are all busy asks whether its endpoint is still active.
STATE_CHECK_SECONDS = 5.0
# How long an owner that is stopped waits for its cut-short requests to report.
ABORT_WAIT_SECONDS = 2.0
# How long an owner waits, after one of its requests ended, for the others to end too.
GATHER_SHARE = 0.25
MAX_GATHER_SECONDS = 0.05
# How often an owner with free lanes and requests open looks for new due rows.
POLL_SECONDS = 0.1
# The longest turn, when no other task waits for the pool: well within the task's time
# limits (`tasks.OWNER_SOFT_TIME_LIMIT_SECONDS`), so a turn never meets them.
MAX_TURN_SECONDS = 120.0


@dataclass
class WorkResult:
    """What one task message came to."""

    owned: bool = False
    sent: int = 0
    outcomes: dict[int, str] = field(default_factory=dict)


def endpoint_work(*, endpoint_id: UUID | str) -> WorkResult:
    """Own the endpoint and send what is due until nothing is (see the module's doc)."""
    token = owner_take(endpoint_id=endpoint_id)
    if token is None:
        return WorkResult()
    metrics.owners_working.inc()
    owner = _Owner(str(endpoint_id), token)
    try:
        owner.run()
    except BaseException:
        # A time limit, a shutdown, a database error: no request of ours goes on
        # unrecorded behind us. Cut the open ones short, record what they came to if the
        # database lets us, and give the endpoint back (else its lease runs out).
        owner.abort()
        raise
    finally:
        metrics.owners_working.dec()
        metrics.deliveries_per_wake.observe(owner.result.sent)
    return owner.result


def delivery_attempt(*, delivery_id: int) -> str:
    """Work the delivery's endpoint now, in this thread (a shell's or a test's synchronous
    path); returns that delivery's outcome (a `DeliveryOutcome` string)."""
    endpoint_id = (
        Delivery.objects.filter(pk=delivery_id).values_list("endpoint_id", flat=True).first()
    )
    if endpoint_id is None:
        return DeliveryOutcome.NOT_CLAIMED
    result = endpoint_work(endpoint_id=endpoint_id)
    if delivery_id in result.outcomes:
        return result.outcomes[delivery_id]
    status = Delivery.objects.filter(pk=delivery_id).values_list("status", flat=True).first()
    return DeliveryOutcome.HELD if status == DeliveryStatus.HELD else DeliveryOutcome.NOT_CLAIMED


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


class _Owner:
    def __init__(self, endpoint_id: str, token: uuid.UUID) -> None:
        self.endpoint_id = endpoint_id
        self.token = token
        self.result = WorkResult(owned=True)
        self.lease = lease_seconds()
        self.renew_every = self.lease / 3
        self.open: dict[int, tuple[Delivery, deadlines.Deadline]] = {}
        # The claim (numbered) each open request came from: a round gathers only the
        # requests of the claim of the one that ended first.
        self.claim_of: dict[int, int] = {}
        self.claims = 0
        self.finished: queue.Queue[tuple[Delivery, Outcome, Credentials]] = queue.Queue()
        # Finished, not yet recorded: a round that all succeeded is recorded just after
        # the next round's requests start (`_sends_before_recording`), and while they are
        # out (`_record_meanwhile`), together with the rounds that succeeded while an
        # earlier recording was still being written: that recording, until the owner has
        # waited for it.
        self.unrecorded: list[Result] = []
        self.recording: tuple[threading.Event, dict[str, Any]] | None = None
        # Rounds in hand when waiting for that recording failed: `abort` writes them.
        self.unwritten: list[tuple[list[Result], Deferral]] = []
        self.endpoint: Endpoint | None = None
        # No new claims before this (monotonic): a rate limit, or requests with no answer.
        self.hold_until = 0.0
        self.gate = Gate(0)
        self.renewed_at = self.turn_ends = self.turn_started = time.monotonic()
        self.first_claim = True
        self.lost = self.inactive = self.awaiting_consent = False
        # Requests this owner cut short because its endpoint stopped (not the receiver's
        # doing): deferred, not recorded as attempts.
        self.cut: set[int] = set()
        self.read_at = 0.0
        self.state_checked_at = time.monotonic()
        # The endpoint's version as read with it (claims check it), and its secrets and
        # signing keys with their expiry, decrypted once per version.
        self.version: str | None = None
        self.secrets: list[tuple[str, Any]] = []
        self.signing_keys: list[tuple[str, Any]] | None = None
        # Whether the last claim found fewer due rows than it asked for (nothing else due
        # then), and the soonest retry this owner recorded (monotonic), for lingering.
        self.ran_dry = False
        self.soonest_retry = float("inf")

    # -- the rounds ----------------------------------------------------------------------

    def run(self) -> None:
        settings = conf.get()
        while True:
            self._mark_working()
            self.renewed_at = self.turn_started = time.monotonic()
            self.turn_ends = self.renewed_at + settings.batch_seconds
            self.first_claim = True
            self.lost = self.inactive = self.awaiting_consent = False
            self.cut.clear()  # (nothing is open between turns)
            hand_on = self._work()
            # (Before the settling: it must not cancel rows whose success is being written.)
            self._await_recording()
            if self.inactive and not self.awaiting_consent:
                _settle_inactive(self.endpoint_id)
            # An endpoint disabled or suspended: no hold outlives it (a resume's wake must
            # find the lease free).
            hold = 0.0 if self.inactive else max(self.hold_until - time.monotonic(), 0.0)
            if self.lost:
                self._clear_mark()
                return
            if hand_on or self.awaiting_consent:
                # Awaiting consent, the rows stay pending: the handshake's success wakes
                # the endpoint again (a look now would find them due and spin).
                self._clear_mark()
                owner_release(endpoint_id=self.endpoint_id, token=self.token, hold_seconds=hold)
                if hand_on or _consented_meanwhile(self.endpoint_id):
                    # (A consent that came before the release had its wake folded into
                    # ours.)
                    dispatch_wakes([self.endpoint_id])
                return
            # A disabled or suspended endpoint's owner looks once more too: a resume that
            # committed after the settling had its wake folded into our work.
            token, wait = hand_back(
                endpoint_id=self.endpoint_id, token=self.token, hold_seconds=hold
            )
            if token is None:
                if wait is not None and wait <= settings.max_countdown_seconds:
                    dispatch_wakes([self.endpoint_id], countdown=max(wait, 0.01))
                return
            self.token = token
            self.hold_until = 0.0

    def _work(self) -> bool:
        """Rounds until nothing is due and nothing open; True when the turn ended with work
        left (to be handed on)."""
        while True:
            self._renew_if_due()
            can_claim = not (self.lost or self.inactive)
            turn_over = self._turn_over()
            if can_claim and not turn_over:
                can_claim = self._read_endpoint()
            if can_claim and not turn_over and time.monotonic() >= self.hold_until:
                self._claim_and_start()
            if self.unrecorded and (
                not self.open
                or not self._recording_busy()
                or len(self.unrecorded) >= conf.get().batch_size
            ):
                # Not while the last recording is still being written, unless nothing is
                # open or a batch's worth waits: the rounds that end meanwhile are written
                # together next, and the owner's requests go on instead of waiting for
                # the database (one endpoint's rounds were otherwise as slow as its
                # recordings).
                self._record_meanwhile()
            if not self.open:
                if self.lost or self.inactive:
                    return False
                if turn_over:
                    # A claim that got all it asked for says there is more (no need to ask).
                    return not self.ran_dry or has_due(endpoint_id=self.endpoint_id)
                linger_until = time.monotonic() + min(
                    LINGER_SECONDS, conf.get().max_countdown_seconds
                )
                if (
                    self.ran_dry
                    and self.soonest_retry > linger_until
                    and self.hold_until < linger_until
                ):
                    return False  # nothing due now nor soon that we know of: hand back
                wait = self._next_wait()
                if wait is None:
                    return False
                linger = min(LINGER_SECONDS, conf.get().max_countdown_seconds)
                if wait is None or wait > linger:
                    return False
                give_back_pooled_connection()
                time.sleep(max(min(wait, self._until_renewal()), 0.01))
                continue
            self._cut_short_if_inactive()
            self._wait_and_record(can_claim and not turn_over)

    def _cut_short_if_inactive(self) -> None:
        """While requests are open, ask the endpoint's state every few seconds (no claim
        checks it while every lane is busy): a disable, a suspension or a deletion cuts
        them short, so its rows are settled within seconds, not after the longest
        timeout an endpoint may have."""
        now = time.monotonic()
        if self.lost or self.inactive or now - self.state_checked_at < STATE_CHECK_SECONDS:
            return
        self.state_checked_at = now
        if not self._stopped(endpoint_state(endpoint_id=self.endpoint_id)):
            return
        self.cut.update(self.open)
        for _, deadline in list(self.open.values()):
            deadline.cut()

    def _stopped(self, state: str | None) -> bool:
        """Whether the endpoint, in this state, gets nothing more from this owner: deleted
        (its rows are gone with it: lost) or disabled or suspended (inactive; a turn after
        a resume reads it again)."""
        if state is None:
            self.lost = True
        elif state != EndpointState.ACTIVE:
            self.inactive = True
            self.read_at = 0.0
        else:
            return False
        return True

    def _turn_over(self) -> bool:
        now = time.monotonic()
        if now < self.turn_ends:
            return False
        if now - self.turn_started < MAX_TURN_SECONDS and not tasks_wait_for_a_slot():
            self.turn_ends = now + conf.get().batch_seconds
            return False
        return True

    def _read_endpoint(self) -> bool:
        age = time.monotonic() - self.read_at
        if self.endpoint is not None and (
            age < FRESH_SECONDS or (self.version is not None and age < VERSIONED_FRESH_SECONDS)
        ):
            return True  # read for the round just before, or checked by every claim
        if self.endpoint is None:
            known = recall_endpoint(self.endpoint_id, VERSIONED_FRESH_SECONDS)
            if known is not None:
                # As the last owner here read it; the first claim checks its version.
                self.endpoint, self.version = known.endpoint, known.version
                self.secrets, self.signing_keys = known.secrets, known.signing_keys
                self.read_at = known.read_at
                return True
        versioned = connection.vendor == "postgresql"
        version = endpoint_version(endpoint_id=self.endpoint_id) if versioned else None
        endpoint = Endpoint.objects.filter(pk=self.endpoint_id).first()
        self.read_at = time.monotonic()
        if self._stopped(None if endpoint is None else endpoint.state):
            forget_endpoint(self.endpoint_id)
            return False
        assert endpoint is not None
        if not validation_ready(endpoint):
            # The target has not consented (CloudEvents handshake): claim nothing; the
            # handshake's success wakes the endpoint again (services.validation).
            self.inactive = self.awaiting_consent = True
            return False
        self.endpoint = endpoint
        self.version = None
        if version is not None and not endpoint.ordered_delivery:
            self.secrets = [(s.value, s.expires_at) for s in endpoint.secrets.all()]
            self.signing_keys = (
                [(k.value, k.expires_at) for k in endpoint.signing_keys.all()]
                if uses_signing_keys(endpoint)
                else None
            )
            self.version = version
            known = KnownEndpoint(
                copy.copy(endpoint), version, self.secrets, self.signing_keys, self.read_at
            )
            remember_endpoint(self.endpoint_id, known)
        else:
            forget_endpoint(self.endpoint_id)
        return True

    def _claim(self, endpoint: Endpoint, limit: int) -> list[Delivery] | None:
        """The round's claim; None when the endpoint changed since we read it (nothing
        taken: read it again, then claim again)."""
        if self.version is None or self.gate.probe:
            if self.gate.probe:
                # The gate itself just wrote the circuit's state (the probe is ours): a
                # version check would find the row changed and send no probe.
                self.read_at = 0.0
            return claim_due(
                endpoint=endpoint, token=self.token, limit=limit, with_expired=self.first_claim
            )
        claimed = claim_round(
            endpoint=endpoint,
            version=self.version,
            token=self.token,
            limit=limit,
            with_expired=self.first_claim,
        )
        if claimed.version != self.version:
            self.read_at = 0.0
            self.version = None
            self.ran_dry = False  # we do not know yet: look again at once
            return None
        return claimed.rows

    def _next_wait(self) -> float | None:
        """Seconds until there may be something to claim, or None for nothing pending."""
        due = next_due_in(endpoint_id=self.endpoint_id)
        if due is None:
            return None
        gate_hold = self.gate.hold_seconds if not self.gate.lanes else 0.0
        return max(due, self.hold_until - time.monotonic(), gate_hold)

    def _claim_and_start(self) -> None:
        endpoint = self.endpoint
        assert endpoint is not None
        self.gate = endpoint_gate(endpoint=endpoint)
        if not self.gate.lanes:
            if not self.open:
                self.hold_until = time.monotonic() + self.gate.hold_seconds
            return
        free = self.gate.lanes - len(self.open)
        if free <= 0:
            return
        wanted = min(free, conf.get().batch_size)
        permits = try_acquire(wanted)
        if not permits and not self.open:
            # The process's open requests are all taken, or others wait for them: wait in
            # line for our lanes' worth, without keeping a pooled database connection
            # from the owners that have theirs.
            give_back_pooled_connection()
            permits = acquire(wanted, timeout=max(self._until_renewal(), 0.01))
        if not permits:
            return
        try:
            claimed = self._claim(endpoint, permits)
        except BaseException:
            release(permits)
            raise
        if claimed is None:
            release(permits)
            return  # the endpoint changed: nothing taken, read again and claim again
        rows = claimed
        self.first_claim = False
        self.ran_dry = len(rows) < permits
        release(permits - len(rows))
        if not rows:
            return
        credentials = self._credentials(rows, endpoint)
        if credentials is None:
            return
        self.claims += 1
        for index, delivery in enumerate(rows):
            wait = rate_limit_wait(endpoint=endpoint)
            if wait:
                rest = rows[index:]
                release(len(rest))
                self.hold_until = time.monotonic() + wait
                self._record([], Deferral(rest, wait))
                return
            self._start(delivery, endpoint, credentials)

    def _credentials(self, rows: list[Delivery], endpoint: Endpoint) -> Credentials | None:
        """The round's signing material (a secret may have expired or been rotated since
        the last round); without any, the rows are dead letters."""
        now = timezone.now()
        if self.version is not None:
            secrets = _unexpired(self.secrets, now)
            private_keys: list[str] | None = []
            if secrets and self.signing_keys is not None:
                private_keys = _unexpired(self.signing_keys, now) or None
        else:
            secrets = [secret.value for secret in endpoint.secrets.unexpired(now)]
            private_keys = signing_keys(endpoint, now) if secrets else []
        problem = ""
        if not secrets:
            problem = "no unexpired signing secret"
        elif private_keys is None:
            problem = "no unexpired v1a signing key"
        if problem:
            release(len(rows))
            decision = Decision(Verdict.DEAD_LETTER, reason=f"endpoint has {problem}")
            self._record([Result(d, decision, error=problem) for d in rows], Deferral([]))
            return None
        assert private_keys is not None
        return Credentials(secrets, private_keys, int(now.timestamp()))

    def _start(self, delivery: Delivery, endpoint: Endpoint, credentials: Credentials) -> None:
        deadline = deadlines.after(endpoint.connect_timeout_seconds + endpoint.read_timeout_seconds)
        self.open[delivery.id] = (delivery, deadline)
        self.claim_of[delivery.id] = self.claims
        destination = destinations.for_url(endpoint.url)
        metrics.lanes_busy.inc()

        def lane() -> None:
            try:
                outcome = destination.send(delivery, deadline, credentials)
            except Exception as exc:
                outcome = Outcome(
                    Kind.RETRY,
                    error=f"not sent, error on our side: {type(exc).__name__}: {exc}",
                    started_at=timezone.now(),
                    local_failure=True,
                )
            finally:
                release(1)
                metrics.lanes_busy.dec()
            self.finished.put((delivery, outcome, credentials))

        # A greenlet per request in the gevent worker, a thread elsewhere; lanes never
        # touch the database.
        start_beside(lane)
        self.result.sent += 1

    def _wait_and_record(self, may_claim: bool) -> None:
        timeout = max(min(self._until_renewal(), STATE_CHECK_SECONDS), 0.01)
        if (may_claim and len(self.open) < self.gate.lanes) or self.unrecorded:
            # (Rounds in hand are written once the last recording is: looked at as often.)
            timeout = min(timeout, POLL_SECONDS)
        give_back_pooled_connection()
        finished = []
        try:
            finished.append(self.finished.get(timeout=timeout))
        except queue.Empty:
            return
        # Lanes started together end together: wait a moment for the others, so a round
        # records and claims for all of them, not one statement set per request (a
        # quarter of a request's time at most, 50 ms at most: nothing for fast receivers).
        # Only for those of the same claim: one claimed later (its row came while the
        # others were out, as events one at a time do) ends later, and waiting for it
        # would leave the lanes that ended idle for the whole window, round after round.
        window = min(MAX_GATHER_SECONDS, finished[0][1].duration_ms / 1000 * GATHER_SHARE)
        waiting = self._claimed_with(finished[0][0].id)
        until = time.monotonic() + window
        while waiting:
            try:
                left = until - time.monotonic()
                ended = self.finished.get(timeout=left) if left > 0 else self.finished.get_nowait()
            except queue.Empty:
                break
            finished.append(ended)
            waiting.discard(ended[0].id)
        # And those of other claims that have ended already (no wait): left in the queue,
        # their lanes would count as busy, and the next claim would ask for less.
        with contextlib.suppress(queue.Empty):
            while True:
                finished.append(self.finished.get_nowait())
        results, deferral = self._settled(finished)
        if deferral.deliveries:
            # Not before the destination said (no claim would take them sooner anyway).
            self.hold_until = max(self.hold_until, time.monotonic() + deferral.seconds)
        for delivery, outcome, _ in finished:
            if outcome.no_answer and delivery.id not in self.cut:
                # The others would most likely wait as long for nothing: no new request
                # for about as long as such a request takes (and the breaker's judgement).
                endpoint = delivery.endpoint
                seconds = max(
                    conf.health().defer_seconds,
                    endpoint.connect_timeout_seconds + endpoint.read_timeout_seconds,
                )
                self.hold_until = max(self.hold_until, time.monotonic() + seconds)
        if may_claim and not deferral.deliveries and self._sends_before_recording(results):
            # Recorded right after the next round's claim, or with the rounds that end
            # while an earlier recording is still being written (`_work`).
            self.unrecorded += results
            return
        # In order: the rounds that succeeded before this one, then this one.
        unrecorded, self.unrecorded = self.unrecorded, []
        self._record(unrecorded + results, deferral)

    def _claimed_with(self, pk: int) -> set[int]:
        """The other open requests of the claim request `pk` came from."""
        claim = self.claim_of.get(pk)
        # (`claim_of` holds the open requests only: both are kept and emptied together.)
        return {other for other, of in self.claim_of.items() if other != pk and of == claim}

    def _settled(
        self, finished: list[tuple[Delivery, Outcome, Credentials]]
    ) -> tuple[list[Result], Deferral]:
        """Finished requests, no longer open: what each came to, and those a destination
        deferred (not sent, for reasons of ours: due again later, no attempt spent)."""
        results: list[Result] = []
        deferred: list[Delivery] = []
        seconds = 0.0
        for delivery, outcome, credentials in finished:
            self.open.pop(delivery.id, None)
            self.claim_of.pop(delivery.id, None)
            if (
                delivery.id in self.cut
                and outcome.status_code is None
                and outcome.kind != Kind.SUCCEEDED  # (a broker's acknowledgement)
            ):
                # Cut short by its endpoint's stop: the settling holds or cancels it.
                deferred.append(delivery)
            elif outcome.kind == Kind.DEFER:
                deferred.append(delivery)
                seconds = max(seconds, _defer_seconds(outcome))
            else:
                results.append(_result(delivery, outcome, credentials))
        return results, Deferral(deferred, seconds)

    def _sends_before_recording(self, results: list[Result]) -> bool:
        """Whether the next round's requests may start before these results are
        recorded: only when all of them succeeded (nothing the endpoint's health, its
        breaker or a suspension would learn from them), the circuit is closed (a
        successful probe closes it only when recorded: the next round's gate would still
        find it half-open) and no key's next delivery waits for them (an unordered
        endpoint). Their rows stay claimed, so nobody sends them again; the recording's
        wait is then no gap between two rounds' requests."""
        endpoint = self.endpoint
        return (
            endpoint is not None
            and not endpoint.ordered_delivery
            and endpoint.circuit_state == CircuitState.CLOSED
            and not self.gate.probe
            and all(r.decision.verdict == Verdict.SUCCEEDED for r in results)
        )

    def _record(self, results: list[Result], deferral: Deferral) -> None:
        try:
            self._await_recording()
        except BaseException:
            self.unwritten.append((results, deferral))  # (not lost: `abort` writes them)
            raise
        r = self._round(results, deferral)
        if r is None:
            return
        try:
            self.result.outcomes.update(record_round(r))
        except IntegrityError:
            self._deleted_meanwhile()

    def _record_meanwhile(self) -> None:
        """Record a round that all succeeded while the owner goes on with the next one
        (its requests are out already): in a thread of its own where database
        connections are pooled (in a gevent worker, a greenlet taking a pooled connection
        and giving it back), so that the writing is no link in the chain of an owner's
        rounds; else here. One such recording at a time: the owner waits for it before it
        records anything else, renews its lease or ends its turn."""
        # (The round stays in `unrecorded` until the last recording is waited for: if
        # that fails, `abort` writes it.)
        self._await_recording()
        results, self.unrecorded = self.unrecorded, []
        if not connections_pooled():
            self._record(results, Deferral([]))
            return
        r = self._round(results, Deferral([]))
        if r is None:
            return
        box: dict[str, Any] = {}
        done = threading.Event()

        def write() -> None:
            try:
                box["outcomes"] = record_round(r)
            except BaseException as exc:  # (answered to the owner when it waits)
                box["error"] = (
                    exc if isinstance(exc, Exception) else RuntimeError(f"interrupted: {exc!r}")
                )
            finally:
                try:
                    connection.close()  # the pooled connection given back
                except Exception:
                    # (A greenlet's error would go to gevent's hub; a connection that
                    # cannot close cleanly is dropped by the pool anyway.)
                    logger.warning("closing the recording's connection failed", exc_info=True)
                finally:
                    done.set()

        # A greenlet in the gevent worker (a thread's bookkeeping, once per round, cost
        # about 2 % of the process's CPU), a thread elsewhere.
        self.recording = (done, box)
        start_beside(write)

    def _recording_busy(self) -> bool:
        """Whether the recording `_record_meanwhile` started is still being written."""
        return self.recording is not None and not self.recording[0].is_set()

    def _await_recording(self, timeout: float | None = None) -> None:
        """Wait for the recording `_record_meanwhile` started (at most `timeout`: then it
        goes on alone); its error is ours."""
        if self.recording is None:
            return
        done, box = self.recording
        # Waiting holds no pooled connection: the writer may need the pool's last one.
        give_back_pooled_connection()
        done.wait(timeout)
        self.recording = None
        error = box.get("error")
        if isinstance(error, IntegrityError):
            self._deleted_meanwhile()
        elif error is not None:
            raise error
        elif "outcomes" not in box:
            raise RuntimeError("the recording of a round did not end in time")
        else:
            self.result.outcomes.update(box["outcomes"])

    def _deleted_meanwhile(self) -> None:
        # The endpoint (and its rows) was deleted while its requests were out.
        logger.info("endpoint %s deleted while sending; results dropped", self.endpoint_id)
        self.lost = True

    def _round(self, results: list[Result], deferral: Deferral) -> Round | None:
        """The round to record (None when there is nothing to write), and the soonest
        retry it schedules."""
        endpoint = self.endpoint
        if endpoint is None or not (results or deferral.deliveries):
            return None
        claim = DeliveryClaim(
            deliveries=[r.delivery for r in results] + deferral.deliveries,
            token=self.token,
            now=timezone.now(),
            # The rows share the owner's lease, renewed while it works.
            lease_expires_at=timezone.now() + timedelta(days=1),
        )
        now = time.monotonic()
        for result in results:
            if result.decision.verdict == Verdict.RETRY:
                self.soonest_retry = min(self.soonest_retry, now + result.decision.delay_seconds)
        if deferral.deliveries:
            self.soonest_retry = min(self.soonest_retry, now + deferral.seconds)
        return Round(claim, endpoint, results, deferral)

    # -- the lease -----------------------------------------------------------------------

    def _until_renewal(self) -> float:
        """Seconds until the lease is due for renewal: no wait of the owner's outlasts it,
        so a lease is renewed every third of it, give or take one statement."""
        return self.renew_every - (time.monotonic() - self.renewed_at)

    def _renew_if_due(self) -> None:
        now = time.monotonic()
        if self.lost or now - self.renewed_at < self.renew_every:
            return
        # The renewal updates every row the owner is sending, the recording some of them:
        # one after the other, never two statements locking the same rows in two orders.
        self._await_recording()
        try:
            renewed = owner_renew(endpoint_id=self.endpoint_id, token=self.token)
        except DatabaseError:
            logger.warning("could not renew the lease of endpoint %s", self.endpoint_id)
            if now - self.renewed_at > self.lease - self.renew_every:
                # Our lease may end before we can renew it: no request of ours may
                # outlive it, as the next owner will send the rows again.
                self._give_up()
            return
        if not renewed:
            self._give_up()
            return
        self.renewed_at = now
        self._mark_working()

    def abort(self) -> None:
        for _, deadline in list(self.open.values()):
            deadline.cut()
        try:
            self._await_recording(timeout=ABORT_WAIT_SECONDS)
        except Exception:
            # Its round stays claimed: sent again once the rows' lease ends.
            logger.warning(
                "endpoint %s: a round's recording failed", self.endpoint_id, exc_info=True
            )
        for results, deferral in self.unwritten:
            with contextlib.suppress(Exception):
                self._record(results, deferral)
        self.unwritten = []
        with contextlib.suppress(Exception):
            until = time.monotonic() + ABORT_WAIT_SECONDS
            finished: list[tuple[Delivery, Outcome, Credentials]] = []
            while len(finished) < len(self.open) and time.monotonic() < until:
                with contextlib.suppress(queue.Empty):
                    finished.append(self.finished.get(timeout=0.1))
            results, deferral = self._settled(finished)
            unrecorded, self.unrecorded = self.unrecorded, []
            self._record(unrecorded + results, deferral)
        with contextlib.suppress(Exception):
            self._clear_mark()
            if not self.lost:
                owner_release(endpoint_id=self.endpoint_id, token=self.token)

    def _give_up(self) -> None:
        self.lost = True
        for _, deadline in list(self.open.values()):
            deadline.cut()

    # -- wake marks ----------------------------------------------------------------------

    def _mark_working(self) -> None:
        # On a Redis error wakes dispatch messages that find us working: more, never fewer.
        with contextlib.suppress(redis.RedisError):
            wake_book().working(self.endpoint_id, self.lease)

    def _clear_mark(self) -> None:
        # On a Redis error the mark expires with the lease; the sweeper covers the gap.
        with contextlib.suppress(redis.RedisError):
            wake_book().clear(self.endpoint_id)


def _defer_seconds(outcome: Outcome) -> float:
    """How long a deferred delivery waits: what its destination said (seconds, in
    `retry_after`), else `WEBHOOKS_DEFER_SECONDS`; never less than that (a destination
    saying 0 would have its owner claim and defer in a tight loop), nor past a
    countdown's bound."""
    least = float(conf.health().defer_seconds)
    try:
        seconds = float(outcome.retry_after or "")
    except (TypeError, ValueError):
        seconds = least
    if not math.isfinite(seconds):
        seconds = least
    return min(max(seconds, least), float(conf.get().max_countdown_seconds))


def _consented_meanwhile(endpoint_id: str) -> bool:
    """Whether an endpoint found awaiting its target's consent has it now."""
    endpoint = Endpoint.objects.filter(pk=endpoint_id).first()
    return endpoint is not None and validation_ready(endpoint)


def _unexpired(values: list[tuple[str, Any]], now: Any) -> list[str]:
    return [value for value, expires_at in values if expires_at is None or expires_at > now]


def _result(delivery: Delivery, outcome: Outcome, credentials: Credentials) -> Result:
    """A destination's outcome as the record it makes, decided by the retry policy."""
    endpoint = delivery.endpoint
    now = timezone.now()
    error = _without_secrets(outcome.error, delivery, credentials) if outcome.error else ""
    if outcome.local_failure:
        logger.error(
            "sending a delivery failed",
            extra={"delivery": delivery.pk, "endpoint": str(delivery.endpoint_id), "error": error},
        )
    if outcome.kind == Kind.SUCCEEDED:
        decision = Decision(Verdict.SUCCEEDED)
    elif outcome.kind == Kind.DEAD and outcome.status_code is None:
        decision = Decision(Verdict.DEAD_LETTER, reason=error[:200])
    else:
        decision = decide(
            policy=endpoint.retry_policy,
            attempt_number=delivery.attempts_in_cycle,
            status_code=outcome.status_code,
            retry_after=outcome.retry_after,
            first_attempt_at=delivery.first_attempt_at or outcome.started_at or now,
            now=now,
        )
    attempt = None
    if outcome.started_at is not None:
        attempt = Attempt(
            delivery_id=delivery.id,
            number=delivery.attempts,
            started_at=outcome.started_at,
            duration_ms=outcome.duration_ms,
            request_headers=outcome.request_headers,
            response_status=outcome.status_code,
            response_body=outcome.response_body,
            error=error[:1000] if outcome.local_failure else error,
        )
    if not error and decision.verdict != Verdict.SUCCEEDED and outcome.status_code is not None:
        error = f"HTTP {outcome.status_code}"
    return Result(
        delivery,
        decision,
        status_code=outcome.status_code,
        error=error,
        attempt=attempt,
        local_failure=outcome.local_failure,
    )


def _without_secrets(text: str, delivery: Delivery, credentials: Credentials) -> str:
    """`requests`/urllib3 quote a refused header value in their messages: never store or
    log a secret one; nor a credential in a URL they quote (`masked_text`)."""
    from webhooks_core import crypto
    from webhooks_core.urlmask import masked_text

    endpoint = delivery.endpoint
    hidden: list[str] = [*credentials.secrets, *credentials.private_keys]
    try:
        plain = endpoint.custom_headers_plain()
    except crypto.SecretDecryptionError:
        plain = {}  # an undecryptable header: nothing of it to quote
    hidden += [plain[name] for name in endpoint.secret_header_names if name in plain]
    for value in sorted(filter(None, hidden), key=len, reverse=True):
        for form in (value, repr(value)[1:-1]):
            text = text.replace(form, MASK)
    return masked_text(text)


def _settle_inactive(endpoint_id: str) -> None:
    """An endpoint disabled or suspended while its owner worked: what waits for it is
    cancelled (disabled) or held (suspended), never left pending or sending."""
    now = timezone.now()
    with transaction.atomic():
        # The endpoint's row locked, as every change of its state locks it first: a resume
        # committed before is seen here (nothing to settle), and one that comes after
        # waits for this commit, then releases what this held.
        # FOR NO KEY UPDATE: state changes take the same lock, a delivery's insert (its
        # foreign key's KEY SHARE) is not held up by it.
        state = (
            Endpoint.objects.select_for_update(no_key=True)
            .filter(pk=endpoint_id)
            .values_list("state", flat=True)
            .first()
        )
        waiting = Delivery.objects.filter(endpoint_id=endpoint_id)
        if state == EndpointState.DISABLED:
            waiting.filter(
                status__in=[DeliveryStatus.PENDING, DeliveryStatus.HELD, DeliveryStatus.SENDING]
            ).update(
                status=DeliveryStatus.CANCELLED,
                completed_at=now,
                next_attempt_at=None,
                lease_token=None,
                lease_expires_at=None,
                updated_at=now,
            )
        elif state == EndpointState.SUSPENDED:
            waiting.filter(status__in=[DeliveryStatus.PENDING, DeliveryStatus.SENDING]).update(
                status=DeliveryStatus.HELD, lease_token=None, lease_expires_at=None, updated_at=now
            )


def settle_inactive_endpoints(endpoint_ids: Any) -> None:
    """The sweeper's net for the same (an owner that died before settling)."""
    for endpoint_id in endpoint_ids:
        try:
            _settle_inactive(str(endpoint_id))
        except DatabaseError:
            # A deadlock with a lapsed owner's recording, say: the next sweep settles it.
            logger.warning("settling endpoint %s failed; the next sweep tries again", endpoint_id)
