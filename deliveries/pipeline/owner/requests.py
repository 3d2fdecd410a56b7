"""An owner's open requests: each in a lane of its own (a greenlet in the gevent worker,
a thread elsewhere; lanes never touch the database), bounded by its deadline, cut short
when the owner must stop, and gathered as they end into the rounds the owner records."""

import contextlib
import queue
import threading
import time

from django.utils import timezone

from deliveries import destinations, metrics
from deliveries.destinations import Credentials, Kind, Outcome
from deliveries.models import Delivery, Endpoint
from deliveries.pipeline.owner.lanes import Permits, release
from deliveries.pipeline.owner.results import defer_seconds, result_of
from deliveries.pipeline.record import Deferral, Result
from webhooks_core.egress import deadlines
from webhooks_core.runtime.cooperative import start_beside

# How long an owner waits, after one of its requests ended, for the others to end too.
GATHER_SHARE = 0.25
MAX_GATHER_SECONDS = 0.05

Finished = tuple[Delivery, Outcome, Credentials]


class OpenRequests:
    def __init__(self) -> None:
        # The guard cuts them from beside the owner: the dict is changed under the lock.
        self._lock = threading.Lock()
        self.open: dict[int, tuple[Delivery, deadlines.Deadline]] = {}
        # The claim (numbered) each open request came from: a round gathers only the
        # requests of the claim of the one that ended first.
        self.claim_of: dict[int, int] = {}
        self.claims = 0
        self.finished: queue.Queue[Finished] = queue.Queue()
        # Requests cut short because the endpoint stopped or the owner must (not the
        # endpoint's doing): deferred, not recorded as attempts.
        self.cut: set[int] = set()

    def __len__(self) -> int:
        return len(self.open)

    def new_claim(self) -> None:
        self.claims += 1

    def start(
        self, delivery: Delivery, endpoint: Endpoint, credentials: Credentials, permits: Permits
    ) -> None:
        deadline = deadlines.after(endpoint.connect_timeout_seconds + endpoint.read_timeout_seconds)
        with self._lock:
            self.open[delivery.id] = (delivery, deadline)
        self.claim_of[delivery.id] = self.claims
        destination = destinations.for_url(endpoint.url)
        metrics.lanes_busy.inc()
        permits.hand_to_lane()

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

        start_beside(lane)

    def cut_all(self) -> None:
        """Cut every open request short (safe from beside the owner)."""
        with self._lock:
            opened = list(self.open.items())
        for pk, (_, deadline) in opened:
            self.cut.add(pk)
            deadline.cut()

    def cut_deadlines(self) -> None:
        """End every open request now, counting what they came to (the owner is stopping:
        a time limit, a lost lease)."""
        with self._lock:
            opened = list(self.open.values())
        for _, deadline in opened:
            deadline.cut()

    def gather(self, timeout: float) -> list[Finished]:
        """The requests that ended: waits up to `timeout` for one, then briefly for the
        others of its claim (lanes started together end together: a round records and
        claims for all of them, not one statement set per request; `GATHER_SHARE` of a
        request's time at most, `MAX_GATHER_SECONDS` at most). Only for those of the
        same claim: one claimed later (its row came while the others were out) ends
        later, and waiting for it would leave the lanes that ended idle, round after
        round."""
        finished = []
        try:
            finished.append(self.finished.get(timeout=timeout))
        except queue.Empty:
            return []
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
        return finished

    def drain(self, seconds: float) -> list[Finished]:
        """What the open requests come to within `seconds` (an owner stopping)."""
        until = time.monotonic() + seconds
        finished: list[Finished] = []
        while len(finished) < len(self.open) and time.monotonic() < until:
            with contextlib.suppress(queue.Empty):
                finished.append(self.finished.get(timeout=0.1))
        return finished

    def _claimed_with(self, pk: int) -> set[int]:
        """The other open requests of the claim request `pk` came from."""
        claim = self.claim_of.get(pk)
        # (`claim_of` holds the open requests only: both are kept and emptied together.)
        return {other for other, of in self.claim_of.items() if other != pk and of == claim}

    def settled(self, finished: list[Finished]) -> tuple[list[Result], Deferral]:
        """Finished requests, no longer open: what each came to, and those a destination
        deferred (not sent, for reasons of ours: due again later, no attempt spent)."""
        results: list[Result] = []
        deferred: list[Delivery] = []
        seconds = 0.0
        for delivery, outcome, credentials in finished:
            with self._lock:
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
                seconds = max(seconds, defer_seconds(outcome))
            else:
                results.append(result_of(delivery, outcome, credentials))
        return results, Deferral(deferred, seconds)
