"""A stateful property test of the owner protocol (Hypothesis), on the real database and
Redis: random interleavings of wakes, message deliveries, claims, sends, crashes, Redis
errors, lease expiries and hand-backs, by three workers, of one endpoint.

After every step: never two owners of the endpoint at once, never more requests open
than its in-flight limit, never a request without a claim (the row is `sending` under the
sender's token). After every run: once the workers go on working and the sweeper runs,
every due row is sent.
"""

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
import redis
from django.db import connection as db_connection
from django.db.models.functions import Now
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import settings as settings_
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from pytest_django.fixtures import Settings as SettingsWrapper

from deliveries import services
from deliveries.destinations import Kind, Outcome
from deliveries.models import Delivery, DeliveryStatus, Endpoint, EndpointOwner, Event
from deliveries.pipeline import messages, wake, wake_marks
from deliveries.pipeline.owner import claims, hand_back, lease_rows
from deliveries.pipeline.owner import lease as owner_lease
from deliveries.pipeline.owner import requests as owner_requests
from deliveries.pipeline.owner import writing as owner_writing

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 2


@dataclass
class Worker:
    token: uuid.UUID | None = None
    open: list[int] = field(default_factory=list)


class FakeBroker:
    """Stands in for Celery's dispatching only: the messages land in a list the state
    machine hands to workers in any order (or loses)."""

    def __init__(self) -> None:
        self.queue: list[str] = []

    @contextlib.contextmanager
    def producer_or_acquire(self) -> Iterator[None]:
        yield None

    def send_task(self, name: str, args: tuple[Any, ...], **options: Any) -> None:
        if name == messages.WORK_ENDPOINT_TASK:
            self.queue.append(args[0])


class OwnerProtocol(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        Delivery.objects.all().delete()
        Event.objects.all().delete()
        EndpointOwner.objects.all().delete()
        Endpoint.objects.all().delete()
        self.endpoint, _ = services.endpoint_create(
            url="http://127.0.0.1:9/hook", event_types=["*"], max_in_flight=LIMIT
        )
        self.redis = redis.Redis.from_url(wakes_url())
        self.redis.flushdb()
        self.broker = FakeBroker()
        self.workers = [Worker() for _ in range(3)]
        self.sent: dict[int, int] = {}
        self.redis_fails = False
        self._patches = [
            mock.patch.object(wake, "celery_app", self.broker),
        ]
        for patch in self._patches:
            patch.start()

    # -- helpers -------------------------------------------------------------------------

    @contextlib.contextmanager
    def redis_maybe_down(self) -> Iterator[None]:
        if not self.redis_fails:
            yield
            return
        book = wake.wake_book()
        with (
            mock.patch.object(book, "mark", side_effect=redis.ConnectionError),
            mock.patch.object(book, "working", side_effect=redis.ConnectionError),
            mock.patch.object(book, "clear", side_effect=redis.ConnectionError),
        ):
            yield

    def wake(self) -> None:
        with self.redis_maybe_down():
            services.wake_endpoints([self.endpoint.pk])

    # -- rules ---------------------------------------------------------------------------

    @rule()
    def a_delivery_falls_due(self) -> None:
        event = Event.objects.create(
            type="order.created", data={}, occurred_at=timezone.now(), fanned_out_at=Now()
        )
        Delivery.objects.create(event=event, endpoint=self.endpoint, next_attempt_at=Now())
        self.wake()

    @rule()
    def the_broker_delivers_a_message_twice(self) -> None:
        # At-least-once: a redelivered or duplicated message, past any deduplication.
        self.broker.queue.append(str(self.endpoint.pk))

    @rule(index=st.integers(0, 2))
    def a_message_reaches_a_worker(self, index: int) -> None:
        worker = self.workers[index]
        if not self.broker.queue or worker.token is not None:
            return
        self.broker.queue.pop(0)
        worker.token = lease_rows.owner_take(endpoint_id=self.endpoint.pk)
        if worker.token is not None:
            with self.redis_maybe_down(), contextlib.suppress(redis.RedisError):
                wake.wake_book().working(str(self.endpoint.pk), lease_rows.lease_seconds())

    @rule(index=st.integers(0, 2))
    def the_owner_claims(self, index: int) -> None:
        worker = self.workers[index]
        if worker.token is None:
            return
        rows = claims.claim_due(
            endpoint=self.endpoint,
            token=worker.token,
            limit=LIMIT - len(worker.open),
            with_expired=True,
        )
        worker.open += [row.pk for row in rows]

    @rule(index=st.integers(0, 2), succeeded=st.booleans())
    def a_request_ends(self, index: int, succeeded: bool) -> None:
        worker = self.workers[index]
        if worker.token is None or not worker.open:
            return
        pk = worker.open.pop(0)
        self.sent[pk] = self.sent.get(pk, 0) + 1
        fields: dict[str, Any] = {"lease_token": None, "lease_expires_at": None}
        if succeeded:
            fields.update(status=DeliveryStatus.SUCCEEDED, next_attempt_at=None)
        else:  # a retry, due at once (short backoff)
            fields.update(status=DeliveryStatus.PENDING, next_attempt_at=Now())
        Delivery.objects.filter(pk=pk, lease_token=worker.token).update(**fields)

    @rule(index=st.integers(0, 2))
    def the_owner_hands_back(self, index: int) -> None:
        worker = self.workers[index]
        if worker.token is None or worker.open:
            return
        with self.redis_maybe_down():
            worker.token, _ = hand_back(endpoint_id=self.endpoint.pk, token=worker.token)

    @rule(index=st.integers(0, 2))
    def a_worker_dies(self, index: int) -> None:
        self.workers[index] = Worker()

    @rule()
    def a_lease_runs_out(self) -> None:
        # Time passes beyond the lease while the owner cannot renew: it gave up (its open
        # requests were cut short) before the lease ended, as `owner` does.
        for worker in self.workers:
            for pk in worker.open:
                self.sent[pk] = self.sent.get(pk, 0) + 1  # it may have arrived
            if worker.token is not None:
                self.workers[self.workers.index(worker)] = Worker()
        past = timezone.now() - timedelta(seconds=1)
        EndpointOwner.objects.update(expires_at=past)
        Delivery.objects.filter(status=DeliveryStatus.SENDING).update(lease_expires_at=past)

    @rule()
    def the_broker_loses_its_messages(self) -> None:
        self.broker.queue.clear()
        self.redis.flushdb()

    @rule(failing=st.booleans())
    def redis_fails_or_recovers(self, failing: bool) -> None:
        self.redis_fails = failing

    @rule()
    def the_sweeper_runs(self) -> None:
        with self.redis_maybe_down():
            services.sweep()

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def never_two_owners(self) -> None:
        owners = [w for w in self.workers if w.token is not None]
        assert len(owners) <= 1
        for worker in owners:
            assert EndpointOwner.objects.filter(pk=self.endpoint.pk, token=worker.token).exists()

    @invariant()
    def never_more_open_than_the_limit(self) -> None:
        assert sum(len(w.open) for w in self.workers) <= LIMIT

    @invariant()
    def never_a_request_without_a_claim(self) -> None:
        for worker in self.workers:
            for pk in worker.open:
                row = Delivery.objects.get(pk=pk)
                assert row.status == DeliveryStatus.SENDING
                assert row.lease_token == worker.token

    # -- liveness ------------------------------------------------------------------------

    def teardown(self) -> None:
        try:
            self.redis_fails = False
            for _ in range(50):
                self._settle_a_little()
                if not Delivery.objects.exclude(status=DeliveryStatus.SUCCEEDED).exists():
                    break
            left = Delivery.objects.exclude(status=DeliveryStatus.SUCCEEDED).count()
            assert left == 0, f"{left} due rows never sent"
            for row in Delivery.objects.all():
                assert self.sent.get(row.pk, 0) >= 1
        finally:
            for patch in self._patches:
                patch.stop()

    def _settle_a_little(self) -> None:
        # A dead worker's lease runs out in time; the sweeper and the workers go on.
        past = timezone.now() - timedelta(seconds=1)
        if not any(w.token for w in self.workers):
            EndpointOwner.objects.update(expires_at=past)
            Delivery.objects.filter(status=DeliveryStatus.SENDING).update(lease_expires_at=past)
            self.redis.flushdb()  # marks of dead owners expire too
            services.sweep()
        for index in range(3):
            self.a_message_reaches_a_worker(index)
            self.the_owner_claims(index)
            while self.workers[index].open:
                self.a_request_ends(index, True)
                self.the_owner_claims(index)
            self.the_owner_hands_back(index)


def wakes_url() -> str:
    from deliveries import conf

    return conf.counters().redis_url


def test_the_owner_protocol_holds_under_any_interleaving() -> None:
    wake_marks.get_book.cache_clear()
    run_state_machine_as_test(
        OwnerProtocol,
        settings=settings(
            max_examples=25,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


# -- the real owner ------------------------------------------------------------------------


class Peer:
    """The endpoint's receiver as the real owner's lanes reach it (its destination): each
    request stays open until the state machine ends it, or its deadline (or its owner)
    cuts it. Counts requests of one row open at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: dict[int, int] = {}
        self.waiting: list[tuple[int, threading.Event, list[bool]]] = []
        self.sent: dict[int, int] = {}
        self.same_row_at_once = 0
        self.most_open = 0
        self.answer_at_once = threading.Event()

    def send(self, delivery: Delivery, deadline: Any, credentials: Any) -> Outcome:
        ended, verdict = threading.Event(), [True]
        pk = delivery.pk
        with self.lock:
            self.open[pk] = self.open.get(pk, 0) + 1
            self.same_row_at_once = max(self.same_row_at_once, self.open[pk])
            self.most_open = max(self.most_open, sum(self.open.values()))
            self.sent[pk] = self.sent.get(pk, 0) + 1
            self.waiting.append((pk, ended, verdict))
        started = timezone.now()
        try:
            while not (ended.is_set() or self.answer_at_once.is_set()):
                if time.monotonic() >= deadline.at:
                    return Outcome(Kind.RETRY, error="cut", started_at=started)
                ended.wait(0.01)
        finally:
            with self.lock:
                self.open[pk] -= 1
                self.waiting = [w for w in self.waiting if w[1] is not ended]
        if verdict[0]:
            return Outcome(Kind.SUCCEEDED, status_code=200, started_at=started)
        return Outcome(Kind.RETRY, status_code=500, started_at=started)

    def end_one(self, succeeded: bool) -> None:
        with self.lock:
            if not self.waiting:
                return
            _, ended, verdict = self.waiting.pop(0)
        verdict[0] = succeeded
        ended.set()


class RealOwnerProtocol(RuleBasedStateMachine):
    """Three workers running the real owner (`endpoint_work`) against a scripted peer,
    with the waits an owner can block on blocked, its lease running out, its endpoint
    deleted or switched from ordered to unordered, and its clock ahead of the database's.
    After every step: never two requests of one row open at once, never more than the
    in-flight limit. After every run: every row is sent (or gone with its endpoint)."""

    def __init__(self) -> None:
        super().__init__()
        Delivery.objects.all().delete()
        Event.objects.all().delete()
        EndpointOwner.objects.all().delete()
        Endpoint.objects.all().delete()
        self.endpoint, _ = services.endpoint_create(
            url="http://127.0.0.1:9/hook",
            event_types=["*"],
            max_in_flight=LIMIT,
            ordered_delivery=True,
            backoff_base_seconds=0.1,
            backoff_max_seconds=0.2,
            max_attempts=50,
        )
        redis.Redis.from_url(wakes_url()).flushdb()
        self.peer = Peer()
        self.deleted = False
        self.threads: list[threading.Thread | None] = [None, None, None]
        self.errors: list[BaseException] = []
        self.recordings_open = threading.Event()
        self.recordings_open.set()
        self.renewals_open = threading.Event()
        self.renewals_open.set()
        self.skew = timedelta(0)
        real_now = timezone.now
        real_record, real_renew = owner_writing.record_round, owner_lease.owner_renew

        def record_round(r: Any) -> Any:
            self.recordings_open.wait(10)
            return real_record(r)

        def owner_renew(**kwargs: Any) -> bool:
            self.renewals_open.wait(10)
            return bool(real_renew(**kwargs))

        self._patches: list[Any] = [
            mock.patch.object(owner_requests.destinations, "for_url", return_value=self.peer),
            mock.patch.object(owner_writing, "record_round", record_round),
            mock.patch.object(owner_lease, "owner_renew", owner_renew),
            mock.patch.object(wake, "celery_app", FakeBroker()),
            mock.patch("django.utils.timezone.now", side_effect=lambda: real_now() + self.skew),
        ]
        for patch in self._patches:
            patch.start()

    def _work(self) -> None:
        try:
            services.endpoint_work(endpoint_id=self.endpoint.pk)
        except BaseException as exc:  # (an owner never fails its task for these rules)
            self.errors.append(exc)
        finally:
            db_connection.close()

    # -- rules ---------------------------------------------------------------------------

    @rule(key=st.sampled_from([None, "a", "b"]))
    def a_delivery_falls_due(self, key: str | None) -> None:
        if self.deleted:
            return
        event = Event.objects.create(
            type="order.created", data={}, occurred_at=timezone.now(), fanned_out_at=Now()
        )
        ordered = Endpoint.objects.filter(pk=self.endpoint.pk, ordered_delivery=True).exists()
        fields: dict[str, Any] = {}
        if key is not None and ordered:
            fields = {"ordering_key": key, "ordering_position": Now()}
        Delivery.objects.create(
            event=event, endpoint=self.endpoint, next_attempt_at=Now(), **fields
        )

    @rule(index=st.integers(0, 2))
    def a_message_reaches_a_worker(self, index: int) -> None:
        thread = self.threads[index]
        if thread is not None and thread.is_alive():
            return
        thread = threading.Thread(target=self._work, daemon=True)
        self.threads[index] = thread
        thread.start()

    @rule(succeeded=st.booleans())
    def a_request_ends(self, succeeded: bool) -> None:
        self.peer.end_one(succeeded)

    @rule(blocked=st.booleans())
    def recordings_block_or_go_on(self, blocked: bool) -> None:
        # A recording waiting on a row lock, a pool checkout or a group commit.
        (self.recordings_open.clear if blocked else self.recordings_open.set)()

    @rule()
    def the_lease_runs_out_during_a_send(self) -> None:
        # The owner's renewal cannot get through for longer than its lease, and another
        # worker's message comes meanwhile: it takes the endpoint over.
        self.renewals_open.clear()
        time.sleep(lease_rows.lease_seconds() * 1.2)
        for index, thread in enumerate(self.threads):
            if thread is None or not thread.is_alive():
                self.a_message_reaches_a_worker(index)
                break
        time.sleep(0.5)
        self.renewals_open.set()

    @rule()
    def the_endpoint_is_deleted_mid_round(self) -> None:
        services.endpoint_delete(endpoint_id=self.endpoint.pk)
        self.deleted = True

    @rule()
    def the_endpoint_stops_asking_for_order(self) -> None:
        Endpoint.objects.filter(pk=self.endpoint.pk).update(ordered_delivery=False)

    @rule(ahead=st.booleans())
    def the_workers_clock_runs_ahead_or_not(self, ahead: bool) -> None:
        self.skew = timedelta(seconds=30 if ahead else 0)

    @rule()
    def time_passes(self) -> None:
        time.sleep(0.2)

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def never_one_row_twice_at_once(self) -> None:
        assert self.peer.same_row_at_once <= 1

    @invariant()
    def never_more_open_than_the_limit(self) -> None:
        assert self.peer.most_open <= LIMIT

    # -- liveness ------------------------------------------------------------------------

    def teardown(self) -> None:
        try:
            self.recordings_open.set()
            self.renewals_open.set()
            self.skew = timedelta(0)
            self.peer.answer_at_once.set()
            for thread in self.threads:
                if thread is not None:
                    thread.join(timeout=30)
                    assert not thread.is_alive(), "an owner ended"
            assert not self.errors, self.errors
            deadline = time.monotonic() + 60
            while Delivery.objects.exclude(status=DeliveryStatus.SUCCEEDED).exists():
                assert time.monotonic() < deadline, "every row is sent"
                past = timezone.now() - timedelta(seconds=1)
                EndpointOwner.objects.update(expires_at=past, not_before=None)
                self._work()
                time.sleep(0.05)
            for row in Delivery.objects.all():
                assert self.peer.sent.get(row.pk, 0) >= 1
            assert not self.errors, self.errors
        finally:
            for patch in self._patches:
                patch.stop()


@pytest.mark.timeout(900)  # real waits for leases, a few minutes on a loaded machine
def test_the_real_owner_holds_the_protocol_under_any_interleaving(
    settings: SettingsWrapper,
) -> None:
    settings.WEBHOOKS_LEASE_SECONDS = 1.5
    wake_marks.get_book.cache_clear()
    run_state_machine_as_test(
        RealOwnerProtocol,
        settings=settings_(
            max_examples=10,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
