"""An endpoint's owner at work: its turns and its rounds.

A task message says only "endpoint E has work". The worker that runs it takes E's lease
(`lease`) or ends at once: the owner that holds it looks at the database again before it
stops. In each round the owner renews its lease when due, reads the endpoint when what it
holds is stale (`endpoint_view`), asks the gate how many requests may be open, claims at
most that many due rows, starts each in a lane (`requests`), and records what ended
(`writing`). With nothing due and nothing open it hands the endpoint back (`hand_back`);
after its turn it hands it on with a message when other tasks wait for the pool; a task
never works longer than `MAX_TASK_SECONDS`, whatever its turns.
"""

import contextlib
import logging
import time
import uuid
import weakref
from collections.abc import Callable

from django.utils import timezone

from deliveries import conf
from deliveries.models import Delivery
from deliveries.pipeline.owner.claims import endpoint_state, has_due, next_due_in
from deliveries.pipeline.owner.endpoint_view import EndpointView
from deliveries.pipeline.owner.gate import Gate, endpoint_gate, rate_limit_wait
from deliveries.pipeline.owner.lanes import Permits, acquire, tasks_wait_for_a_slot, try_acquire
from deliveries.pipeline.owner.lease import Lease, hand_back
from deliveries.pipeline.owner.requests import OpenRequests
from deliveries.pipeline.owner.results import WorkResult, sends_before_recording
from deliveries.pipeline.owner.settling import consented_meanwhile, settle_inactive
from deliveries.pipeline.owner.writing import Writer
from deliveries.pipeline.record import Deferral, DeliveryClaim, Result, Round
from deliveries.pipeline.wake import wake_after_hold, wake_endpoints
from webhooks_core import conf as core_conf
from webhooks_core.db.connections import give_back_pooled_connection
from webhooks_core.retry_policy import Decision, Verdict

logger = logging.getLogger("deliveries.pipeline.owner")

# A row falling due this soon is waited for by its owner rather than woken for later
# (never longer than a countdown may wait: longer waits belong to the database).
LINGER_SECONDS = 1.0
# How often an owner whose lanes are all busy asks whether its endpoint is still active.
STATE_CHECK_SECONDS = 5.0
# How long an owner that is stopped waits for its cut-short requests to report.
ABORT_WAIT_SECONDS = 2.0
# How often an owner with free lanes and requests open looks for new due rows.
POLL_SECONDS = 0.1
# The longest a task works its endpoint, all its turns together, when no other task waits
# for the pool: well within the task's time limits (`tasks.OWNER_SOFT_TIME_LIMIT_SECONDS`),
# so an owner never meets them, however busy its endpoint.
MAX_TASK_SECONDS = 120.0
# A turn whose claims took nothing while rows were due (a claim and the look that counts
# due rows disagree: a bug) holds the endpoint this long before it is looked at again.
EMPTY_CLAIM_HOLD_SECONDS = 5.0


def _weakly(
    method: Callable[[list[Result], Deferral], Round | None],
) -> Callable[[list[Result], Deferral], Round | None]:
    """`method`, called through a weak reference to its object."""
    ref = weakref.WeakMethod(method)

    def call(results: list[Result], deferral: Deferral) -> Round | None:
        bound = ref()
        return bound(results, deferral) if bound is not None else None

    return call


class Owner:
    def __init__(self, endpoint_id: str, token: uuid.UUID, result: WorkResult) -> None:
        self.endpoint_id = endpoint_id
        self.result = result
        self.requests = OpenRequests()
        self.lease = Lease(endpoint_id, token, on_overdue=self.requests.cut_deadlines)
        self.view = EndpointView(endpoint_id)
        # The writer calls back without holding the owner: no reference cycle, so the
        # owner and all it holds go when its task ends, not at a rare full collection.
        self.writer = Writer(endpoint_id, _weakly(self._round), self.result.note)
        # No new claims before this (monotonic): a rate limit, or requests with no answer.
        self.hold_until = 0.0
        self.gate = Gate(0)
        self.started = self.turn_ends = time.monotonic()
        self.first_claim = True
        self.state_checked_at = time.monotonic()
        # Whether the last claim found fewer due rows than it asked for (nothing else due
        # then), and the soonest retry this owner recorded (monotonic), for lingering.
        self.ran_dry = False
        self.soonest_retry = float("inf")

    @property
    def lost(self) -> bool:
        """The endpoint is not ours to send to any more: its lease lost, or it is gone."""
        return self.lease.lost or self.view.gone or self.writer.deleted

    # -- turns ---------------------------------------------------------------------------

    def run(self) -> None:
        # A take-back (rows came due as the owner stopped) goes on with the same turn: were
        # it a new one, a busy endpoint's owner would never reach its turn's end.
        self.turn_ends = time.monotonic() + conf.get().turn_seconds
        while True:
            self.lease.mark_working()
            self.first_claim = True
            self.view.new_turn()
            self.requests.cut.clear()  # (nothing is open between turns)
            claims_before = self.requests.claims
            hand_on = self._work()
            # (Before the settling: it must not cancel rows whose success is being written.)
            self.writer.await_recording(self._wait_bound())
            inactive = self.view.inactive
            if inactive and not self.view.awaiting_consent:
                settle_inactive(self.endpoint_id)
            # An endpoint disabled or suspended: no hold outlives it (a resume's wake must
            # find the lease free).
            hold = 0.0 if inactive else max(self.hold_until - time.monotonic(), 0.0)
            if self.lost:
                self.lease.clear_mark()
                return
            if hand_on or self.view.awaiting_consent:
                self._hand_on(hand_on)
                return
            # A disabled or suspended endpoint's owner looks once more too: a resume that
            # committed after the settling had its wake folded into our work.
            token, wait = hand_back(
                endpoint_id=self.endpoint_id, token=self.lease.token, hold_seconds=hold
            )
            if token is None:
                if wait is not None and wait <= core_conf.scheduling().max_countdown_seconds:
                    self._wake_for(max(wait, 0.01), hold)
                return
            self.lease.taken_back(token)
            self.hold_until = 0.0
            # (A turn whose claims never ran, for want of permits, found nothing odd.)
            if self.requests.claims == claims_before and not self.first_claim and not inactive:
                self._empty_claims()
                return
            if time.monotonic() - self.started >= MAX_TASK_SECONDS:
                self._hand_on(True)
                return

    def _hand_on(self, hand_on: bool) -> None:
        """End the task with the lease given back; a message goes on with the work.
        Awaiting consent, the rows stay pending: the handshake's success wakes the
        endpoint again (a look now would find them due and spin)."""
        hold = 0.0 if self.view.inactive else max(self.hold_until - time.monotonic(), 0.0)
        self.lease.clear_mark()
        self.lease.release(hold_seconds=hold)
        if hand_on or consented_meanwhile(self.endpoint_id):
            # (A consent that came before the release had its wake folded into ours.)
            self._wake_for(hold, hold)

    def _wake_for(self, wait: float, hold: float) -> None:
        """The wake `wait` seconds from now, the lease given back with a `hold`: when the
        wake is for the hold's end, the hold's own mark, which folds the wakes of the events
        meanwhile (none could be served sooner)."""
        if hold > 0 and wait <= hold:
            wake_after_hold(self.endpoint_id, hold)
        else:
            wake_endpoints([self.endpoint_id], countdown=wait)

    def _empty_claims(self) -> None:
        """A whole turn's claims took nothing, yet its last look found rows due now: the
        claim and the look disagree. Never a loop: say so, and hold the endpoint a while."""
        logger.warning(
            "endpoint %s: rows are due but no claim took any; held %.0f s",
            self.endpoint_id,
            EMPTY_CLAIM_HOLD_SECONDS,
        )
        self.lease.clear_mark()
        self.lease.release(hold_seconds=EMPTY_CLAIM_HOLD_SECONDS)
        self._wake_for(EMPTY_CLAIM_HOLD_SECONDS, EMPTY_CLAIM_HOLD_SECONDS)

    def _work(self) -> bool:
        """Rounds until nothing is due and nothing open; True when the turn ended with work
        left (to be handed on)."""
        while True:
            self._renew_if_due()
            can_claim = not (self.lost or self.view.inactive)
            turn_over = self._turn_over()
            if can_claim and not turn_over:
                can_claim = self.view.read()
            if can_claim and not turn_over and time.monotonic() >= self.hold_until:
                self._claim_and_start()
            writer = self.writer
            if writer.unrecorded and (
                not self.requests
                or not writer.busy()
                or len(writer.unrecorded) >= conf.get().claim_size
            ):
                # Not while the last recording is still being written, unless nothing is
                # open or a batch's worth waits: the rounds that end meanwhile are written
                # together next.
                writer.write_meanwhile(wait=self._wait_bound())
            if self.requests:
                self._cut_short_if_inactive()
                self._wait_and_record(can_claim and not turn_over)
                continue
            if self.lost or self.view.inactive:
                return False
            if turn_over:
                # A claim that got all it asked for says there is more (no need to ask).
                return not self.ran_dry or has_due(endpoint_id=self.endpoint_id)
            wait = self._linger()
            if wait is None:
                return False
            give_back_pooled_connection()
            time.sleep(max(min(wait, self.lease.until_renewal()), 0.01))

    def _linger(self) -> float | None:
        """Seconds to wait for a row falling due soon, or None to hand the endpoint back."""
        linger = min(LINGER_SECONDS, core_conf.scheduling().max_countdown_seconds)
        linger_until = time.monotonic() + linger
        if self.ran_dry and self.soonest_retry > linger_until and self.hold_until < linger_until:
            return None  # nothing due now nor soon that we know of
        due = next_due_in(endpoint_id=self.endpoint_id)
        if due is None:
            return None
        gate_hold = self.gate.hold_seconds if not self.gate.lanes else 0.0
        wait = max(due, self.hold_until - time.monotonic(), gate_hold)
        return None if wait > linger else wait

    def _turn_over(self) -> bool:
        now = time.monotonic()
        if now < self.turn_ends:
            return False
        if now - self.started < MAX_TASK_SECONDS and not tasks_wait_for_a_slot():
            self.turn_ends = now + conf.get().turn_seconds
            return False
        return True

    def _line_wait(self) -> float:
        """The longest the owner waits in line for permits: until its lease is due for
        renewal, and until its turn's end when other tasks wait for the pool (it is handed
        on then; otherwise its turn goes on, and it keeps its place in the line)."""
        wait = self.lease.until_renewal()
        if tasks_wait_for_a_slot():
            wait = min(wait, self.turn_ends - time.monotonic())
        return max(wait, 0.01)

    def _wait_bound(self) -> float:
        """The longest the owner may wait for a recording: until its lease is due to be
        cut, so a recording blocked on a lock never keeps it past its lease."""
        return max(self.lease.until_cut(), 0.01)

    # -- rounds --------------------------------------------------------------------------

    def _claim_and_start(self) -> None:
        endpoint = self.view.endpoint
        assert endpoint is not None
        self.gate = endpoint_gate(endpoint=endpoint)
        if not self.gate.lanes:
            if not self.requests:
                self.hold_until = time.monotonic() + self.gate.hold_seconds
            return
        free = self.gate.lanes - len(self.requests)
        if free <= 0:
            return
        wanted = min(free, conf.get().claim_size)
        count = try_acquire(wanted)
        if not count and not self.requests:
            # The process's open requests are all taken, or others wait for them: wait in
            # line for our lanes' worth, without keeping a pooled database connection
            # from the owners that have theirs.
            give_back_pooled_connection()
            count = acquire(wanted, timeout=self._line_wait())
            if not count:
                # No claim could look: what the last one found (`ran_dry`) is stale. The
                # turn goes on waiting in line, and is handed on at its end, not held as
                # if a claim had taken nothing while rows were due.
                self.ran_dry = False
        if not count:
            return
        with Permits(count) as permits:
            rows = self.view.claim(
                self.lease.token, count, first=self.first_claim, probe=self.gate.probe
            )
            if rows is None:
                self.ran_dry = False  # the endpoint changed: read it again, claim again
                return
            self.first_claim = False
            self.ran_dry = len(rows) < count
            if rows:
                self._start(rows, permits)

    def _start(self, rows: list[Delivery], permits: Permits) -> None:
        endpoint = self.view.endpoint
        assert endpoint is not None
        self.requests.new_claim()  # (rows taken: the turn claimed something)
        credentials = self.view.credentials()
        if isinstance(credentials, str):
            # Without signing material the rows are dead letters.
            decision = Decision(Verdict.DEAD_LETTER, reason=f"endpoint has {credentials}")
            results = [Result(d, decision, error=credentials) for d in rows]
            self.writer.write(results, Deferral([]), wait=self._wait_bound())
            return
        for index, delivery in enumerate(rows):
            wait = rate_limit_wait(endpoint=endpoint)
            if wait:
                self.hold_until = time.monotonic() + wait
                self.writer.write([], Deferral(rows[index:], wait), wait=self._wait_bound())
                return
            self.requests.start(delivery, endpoint, credentials, permits)
            self.result.sent += 1

    def _wait_and_record(self, may_claim: bool) -> None:
        timeout = max(min(self.lease.until_renewal(), STATE_CHECK_SECONDS), 0.01)
        if (may_claim and len(self.requests) < self.gate.lanes) or self.writer.unrecorded:
            # (Rounds in hand are written once the last recording is: looked at as often.)
            timeout = min(timeout, POLL_SECONDS)
        give_back_pooled_connection()
        finished = self.requests.gather(timeout)
        if not finished:
            return
        results, deferral = self.requests.settled(finished)
        if deferral.deliveries:
            # Not before the destination said (no claim would take them sooner anyway).
            self.hold_until = max(self.hold_until, time.monotonic() + deferral.seconds)
        for delivery, outcome, _ in finished:
            if outcome.no_answer and delivery.id not in self.requests.cut:
                # The others would most likely wait as long for nothing: no new request
                # for about as long as such a request takes (and the breaker's judgement).
                endpoint = delivery.endpoint
                seconds = max(
                    conf.health().defer_seconds,
                    endpoint.connect_timeout_seconds + endpoint.read_timeout_seconds,
                )
                self.hold_until = max(self.hold_until, time.monotonic() + seconds)
        if (
            may_claim
            and not deferral.deliveries
            and sends_before_recording(self.view.endpoint, self.gate, results)
        ):
            # Recorded right after the next round's claim, or with the rounds that end
            # while an earlier recording is still being written (`_work`).
            self.writer.unrecorded += results
            return
        # In order: the rounds that succeeded before this one, then this one.
        unrecorded, self.writer.unrecorded = self.writer.unrecorded, []
        self.writer.write(unrecorded + results, deferral, wait=self._wait_bound())

    def _cut_short_if_inactive(self) -> None:
        """While requests are open, ask the endpoint's state every few seconds (no claim
        checks it while every lane is busy): a disable, a suspension or a deletion cuts
        them short, so its rows are settled within seconds, not after the longest
        timeout an endpoint may have."""
        now = time.monotonic()
        if self.lost or self.view.inactive or now - self.state_checked_at < STATE_CHECK_SECONDS:
            return
        self.state_checked_at = now
        if self.view.stopped(endpoint_state(endpoint_id=self.endpoint_id)):
            self.requests.cut_all()

    def _round(self, results: list[Result], deferral: Deferral) -> Round | None:
        """The round to record (None when there is nothing to write), and the soonest
        retry it schedules."""
        endpoint = self.view.endpoint
        if endpoint is None or not (results or deferral.deliveries):
            return None
        claim = DeliveryClaim(
            deliveries=[r.delivery for r in results] + deferral.deliveries,
            token=self.lease.token,
            now=timezone.now(),
            # The rows share the owner's lease: near its end, the recording asks the
            # database which of them are still ours.
            lease_expires_at=self.lease.expires_at(),
        )
        now = time.monotonic()
        for result in results:
            if result.decision.verdict == Verdict.RETRY:
                self.soonest_retry = min(self.soonest_retry, now + result.decision.delay_seconds)
        if deferral.deliveries:
            self.soonest_retry = min(self.soonest_retry, now + deferral.seconds)
        return Round(claim, endpoint, results, deferral)

    # -- the lease -----------------------------------------------------------------------

    def _renew_if_due(self) -> None:
        if self.lost or self.lease.until_renewal() > 0:
            return
        # The renewal updates every row the owner is sending, the recording some of them:
        # one after the other, never two statements locking the same rows in two orders.
        self.writer.await_recording(self._wait_bound())
        if not self.lease.renew():
            self.lease.lost = True
            self.requests.cut_deadlines()

    def abort(self) -> None:
        self.requests.cut_deadlines()
        try:
            self.writer.await_recording(ABORT_WAIT_SECONDS)
        except Exception:
            # Its round stays claimed: sent again once the rows' lease ends.
            logger.warning(
                "endpoint %s: a round's recording failed", self.endpoint_id, exc_info=True
            )
        for results, deferral in self.writer.unwritten:
            with contextlib.suppress(Exception):
                self.writer.write(results, deferral, wait=ABORT_WAIT_SECONDS)
        self.writer.unwritten = []
        with contextlib.suppress(Exception):
            results, deferral = self.requests.settled(self.requests.drain(ABORT_WAIT_SECONDS))
            unrecorded, self.writer.unrecorded = self.writer.unrecorded, []
            self.writer.write(unrecorded + results, deferral, wait=ABORT_WAIT_SECONDS)
        with contextlib.suppress(Exception):
            self.lease.clear_mark()
            if not self.lost:
                self.lease.release()
