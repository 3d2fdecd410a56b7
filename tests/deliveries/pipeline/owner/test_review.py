"""The sending engine's owner as issue 41's review found it: each test reproduces one item
from outside (the real worker, a real HTTP peer on 127.0.0.1, the real database), so that
it holds whatever shape the owner's modules take."""

import contextlib
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from celery.signals import task_postrun, task_prerun
from django.db import connection, transaction
from django.db.models.functions import Now
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from deliveries import services
from deliveries.models import (
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointOwner,
    EndpointSecret,
    EndpointState,
    Event,
)
from deliveries.pipeline.owner import lanes
from deliveries.signals import delivery_succeeded
from tests.conftest import wait_until
from tests.fixtures import FAST_POLICY, new_endpoint
from tests.helpers import sweeping_in_background
from tests.receiver import PeerServer, Receiver, Reply

pytestmark = pytest.mark.django_db(transaction=True)


# Short timeouts and backoff, so that a test's retries come within its patience.
def fast_endpoint(url: str, **fields: Any) -> Endpoint:
    return new_endpoint(url, **{**FAST_POLICY, **fields})


def delivery_rows(endpoint: Endpoint, count: int) -> list[Delivery]:
    """Deliveries of new events to the endpoint, pending and due now (no wake sent)."""
    now = timezone.now()
    events = Event.objects.bulk_create(
        [Event(type="order.created", data={"n": n}, occurred_at=now) for n in range(count)]
    )
    return Delivery.objects.bulk_create(
        [Delivery(event=event, endpoint=endpoint, next_attempt_at=now) for event in events]
    )


def count_in(endpoint: Endpoint, status: str) -> int:
    return Delivery.objects.filter(endpoint=endpoint, status=status).count()


def eventually(predicate: Callable[[], object], timeout: float) -> bool:
    """Whether `predicate` came true within `timeout` seconds."""
    try:
        wait_until(predicate, timeout=timeout)
    except AssertionError:
        return False
    return True


def database_commits() -> int:
    """Transactions committed in the test database so far, all processes counted."""
    with connection.cursor() as cursor:
        # (A backend reports its counts at most about once a second: a rate over a
        # window of several seconds is what this can tell.)
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        )
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def in_its_own_connection(target: Callable[[], object]) -> threading.Thread:
    """A thread (started) running `target` on a database connection of its own."""

    def run() -> None:
        try:
            target()
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# --- item 1: keyed rows of an endpoint that no longer asks for order --------------------

# The bound is 3,000 commits in the minute after the change, all processes
# counted: the same pace over a shorter window.
COMMIT_WINDOW_SECONDS = 10.0
MOST_COMMITS_IN_WINDOW = 500


def _sent_without_spinning(endpoint: Endpoint, count: int, act: Callable[[], object]) -> None:
    """After `act`, the endpoint's `count` rows are delivered within 30 s, and the
    database sees no more than the bound's pace of commits meanwhile."""
    try:
        before = database_commits()
        started = time.monotonic()
        act()
        delivered = eventually(lambda: count_in(endpoint, DeliveryStatus.SUCCEEDED) == count, 30)
        # A pace over a window: the window has its length whatever happened in it.
        time.sleep(max(COMMIT_WINDOW_SECONDS - (time.monotonic() - started), 0.0))
        commits = database_commits() - before
        seconds = time.monotonic() - started
        sent = count_in(endpoint, DeliveryStatus.SUCCEEDED)
        assert delivered, f"{sent} of {count} delivered in 30 s ({commits} commits meanwhile)"
        assert commits <= MOST_COMMITS_IN_WINDOW * seconds / COMMIT_WINDOW_SECONDS, (
            f"{commits} commits in {seconds:.0f} s: the owner spins"
        )
    finally:
        # An owner still spinning stops when its endpoint is gone.
        services.endpoint_delete(endpoint_id=endpoint.pk)


@pytest.mark.timeout(90)
def test_keyed_rows_held_while_ordered_are_sent_after_order_is_dropped_and_a_resume(
    celery_worker: object, receiver: Receiver
) -> None:
    # Item 1: the round claim took only rows without a key while the owner's look counted
    # keyed rows as due: it took the lease, claimed nothing and looked again, for ever.
    endpoint = fast_endpoint(receiver.url, ordered_delivery=True)
    services.endpoint_suspend(endpoint_id=endpoint.pk, reason="maintenance")
    for n in range(3):
        services.emit("order.created", {"n": n}, ordering_key="customer-1")
    wait_until(lambda: count_in(endpoint, DeliveryStatus.HELD) == 3, what="three held rows")
    services.endpoint_update(endpoint=Endpoint.objects.get(pk=endpoint.pk), ordered_delivery=False)

    _sent_without_spinning(endpoint, 3, lambda: services.endpoint_resume(endpoint_id=endpoint.pk))


@pytest.mark.timeout(90)
def test_a_keyed_dead_letter_retried_after_order_is_dropped_is_sent(
    celery_worker: object, receiver: Receiver
) -> None:
    # Item 1, the same through a retried dead letter.
    endpoint = fast_endpoint(receiver.url, ordered_delivery=True)
    receiver.script(401)  # a dead letter at once
    services.emit("order.created", {"n": 1}, ordering_key="customer-1")
    wait_until(lambda: count_in(endpoint, DeliveryStatus.DEAD_LETTERED) == 1, what="a dead letter")
    dead = Delivery.objects.get(endpoint=endpoint)
    services.endpoint_update(endpoint=Endpoint.objects.get(pk=endpoint.pk), ordered_delivery=False)

    _sent_without_spinning(endpoint, 1, lambda: services.delivery_retry(delivery_id=dead.pk))


# --- item 5: the process's permits after a failure while preparing a round --------------


@pytest.mark.timeout(60)
def test_a_round_whose_secret_cannot_be_decrypted_gives_its_permits_back(
    celery_worker: object, receiver: Receiver, settings: SettingsWrapper
) -> None:
    # Item 5: a failure after the claim, while the round's credentials were read, kept
    # the claimed rows' permits of the process's cap on open requests for good.
    settings.WEBHOOKS_DELIVERY_MAX_OPEN_REQUESTS = 2
    # Ordered: its round reads the secrets after the claim, with the rows' permits held.
    broken = fast_endpoint(receiver.url, ordered_delivery=True, max_in_flight=2)
    EndpointSecret.objects.filter(endpoint=broken).update(encrypted_value="not a token")
    delivery_rows(broken, 2)
    healthy = fast_endpoint(receiver.url)
    [waiting] = delivery_rows(healthy, 1)
    open_before = lanes.open_requests()

    with contextlib.suppress(Exception):  # (how the owner fails is not the point)
        services.endpoint_work(endpoint_id=broken.pk)

    assert lanes.open_requests() == open_before, "permits kept by an owner that has ended"
    services.wake_endpoints([healthy.pk])
    assert eventually(
        lambda: Delivery.objects.filter(pk=waiting.pk, status=DeliveryStatus.SUCCEEDED).exists(),
        15,
    ), "another endpoint of the process sends nothing"


# --- item 8: a task's outcomes ------------------------------------------------------------


@pytest.mark.timeout(180)
def test_a_task_s_outcomes_do_not_grow_with_every_delivery_it_sends(
    receiver: Receiver, settings: SettingsWrapper
) -> None:
    # Item 8: `WorkResult.outcomes` kept every delivery a task sent, for its whole life.
    settings.WEBHOOKS_DELIVERY_TURN_SECONDS = 300.0  # all of them in one task
    endpoint = fast_endpoint(receiver.url, max_in_flight=20)
    delivery_rows(endpoint, 500)

    result = services.endpoint_work(endpoint_id=endpoint.pk)

    assert result.sent == 500
    assert count_in(endpoint, DeliveryStatus.SUCCEEDED) == 500
    assert len(result.outcomes) <= 100, f"{len(result.outcomes)} outcomes kept by one task"


# --- a stale owner, and an owner whose waits outlast its lease --------------------------


def _take_over_once_the_lease_ran_out(
    endpoint: Endpoint, held: threading.Event, answered_at: float
) -> None:
    """What a second owner does to an owner blocked past its lease, in one transaction:
    holds the lease's row (so the first owner's renewal waits), and once the database
    says the lease ran out, takes the lease and the rows it was sending; commits once
    the receiver has answered the first owner's request (`answered_at`, Unix time)."""
    with transaction.atomic():
        EndpointOwner.objects.select_for_update().get(endpoint=endpoint)
        held.set()
        wait_until(
            lambda: EndpointOwner.objects.filter(endpoint=endpoint, expires_at__lt=Now()).exists(),
            timeout=30,
            what="the first owner's lease to run out",
        )
        token = uuid.uuid4()
        until = Now() + timedelta(minutes=5)
        EndpointOwner.objects.filter(endpoint=endpoint).update(
            token=token, expires_at=until, taken_at=Now()
        )
        Delivery.objects.filter(endpoint=endpoint, status=DeliveryStatus.SENDING).update(
            lease_token=token, lease_expires_at=until
        )
        wait_until(lambda: time.time() > answered_at, timeout=30, what="the answer")


LEASE = 6.0


@pytest.mark.parametrize("status", [200, 410])
@pytest.mark.timeout(90)
def test_an_owner_whose_rows_were_taken_over_reports_nothing_for_them(
    receiver: Receiver, settings: SettingsWrapper, status: int
) -> None:
    # Item 8: the recording's "rows still ours" check never ran, so an owner whose lease
    # ran out (its renewal blocked) reported the rows another owner had taken.
    settings.WEBHOOKS_LEASE_SECONDS = LEASE
    endpoint = fast_endpoint(receiver.url, read_timeout_seconds=20)
    [row] = delivery_rows(endpoint, 1)
    # Answered after the lease ran out: an owner that kept its request open past its
    # lease gets it.
    delay = LEASE + 2
    receiver.default = Reply(status=status, delay_seconds=delay)
    reported: list[int] = []

    def note(sender: object, delivery: Delivery, **_: object) -> None:
        reported.append(delivery.pk)

    delivery_succeeded.connect(note, sender=Delivery, weak=False)
    try:
        owner = in_its_own_connection(lambda: services.endpoint_work(endpoint_id=endpoint.pk))
        [request] = receiver.wait_for(1)
        held = threading.Event()
        answered_at = request.received_at + delay + 0.5
        second = in_its_own_connection(
            lambda: _take_over_once_the_lease_ran_out(endpoint, held, answered_at)
        )
        assert held.wait(10)
        second.join(40)
        owner.join(30)
        assert not second.is_alive()
        assert not owner.is_alive()
    finally:
        delivery_succeeded.disconnect(note, sender=Delivery)

    assert row.pk not in reported, "delivery_succeeded sent by an owner that lost the row"
    endpoint.refresh_from_db()
    assert endpoint.state == EndpointState.ACTIVE, "suspended by an owner that lost the row"


# --- item 2: an owner blocked past its lease, while its first request is still open -----


@dataclass(frozen=True)
class Exchange:
    webhook_id: str
    started: float  # monotonic
    ended: float  # answered, or dropped by the sender


class HoldingPeer:
    """A webhook receiver on 127.0.0.1 that holds chosen requests open and logs, for each
    request, its webhook id and when it began and ended (answered, or dropped by the
    sender: a sender that cuts a request short ends it then)."""

    def __init__(self, hold: Callable[[int], float]) -> None:
        # Seconds to hold the request that arrives n-th (from 0) before answering 200.
        self.hold = hold
        self.arrived: list[str] = []
        self.exchanges: list[Exchange] = []
        self.lock = threading.Lock()
        self.server = PeerServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    @contextlib.contextmanager
    def running(self) -> Iterator["HoldingPeer"]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()

    def overlapping(self) -> list[tuple[Exchange, Exchange]]:
        """Pairs of requests for one webhook id that were open at the same time."""
        with self.lock:
            exchanges = sorted(self.exchanges, key=lambda e: e.started)
        return [
            (a, b)
            for i, a in enumerate(exchanges)
            for b in exchanges[i + 1 :]
            if a.webhook_id == b.webhook_id and b.started < a.ended
        ]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                webhook_id = self.headers.get("X-Webhook-Id", "")
                started = time.monotonic()
                with peer.lock:
                    nth = len(peer.arrived)
                    peer.arrived.append(webhook_id)
                dropped = self._dropped_within(started + peer.hold(nth))
                if not dropped:
                    with contextlib.suppress(OSError):
                        self.send_response(200)
                        self.send_header("Content-Length", "2")
                        self.end_headers()
                        self.wfile.write(b"ok")
                with peer.lock:
                    peer.exchanges.append(Exchange(webhook_id, started, time.monotonic()))
                self.close_connection = dropped

            def _dropped_within(self, until: float) -> bool:
                """Wait until `until`; True as soon as the sender closes the connection."""
                while (left := until - time.monotonic()) > 0:
                    readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
                    if not readable:
                        continue
                    try:
                        if not self.connection.recv(1, socket.MSG_PEEK):
                            return True
                    except OSError:
                        return True
                    time.sleep(0.05)  # (bytes of a next request: not ours to read yet)
                return False

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


def _waiting_for_a_lock() -> int:
    """Backends of the test database waiting for a lock."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


@contextlib.contextmanager
def row_held(model: type[Endpoint], pk: Any, seconds: float) -> Iterator[threading.Thread]:
    """Another transaction holds the row `FOR NO KEY UPDATE` (as an operator's change of
    an endpoint does) for `seconds`, from when the block starts; the block's end waits
    for it to commit."""
    held = threading.Event()

    def hold() -> None:
        with transaction.atomic():
            model.objects.select_for_update(no_key=True).get(pk=pk)
            held.set()
            # The scenario's length, not a wait for something to happen.
            threading.Event().wait(seconds)

    thread = in_its_own_connection(hold)
    assert held.wait(10)
    try:
        yield thread
    finally:
        thread.join(seconds + 30)


SHORT_LEASE = 3.0
# The first request is held longer than the lease, the row longer still.
FIRST_HELD_SECONDS = 15.0
ROW_HELD_SECONDS = 3 * SHORT_LEASE


@pytest.mark.parametrize("blocked", ["its endpoint's row", "another owner's recording"])
@pytest.mark.timeout(150)
def test_an_owner_blocked_past_its_lease_has_no_request_sent_twice_at_once(
    celery_worker: object, receiver: Receiver, settings: SettingsWrapper, blocked: str
) -> None:
    # Item 2: an owner whose recording (or its wait on the group commit) blocks stops
    # renewing its lease, and a second owner sends again a row whose request is still open.
    settings.WEBHOOKS_LEASE_SECONDS = SHORT_LEASE
    settings.WEBHOOKS_WAKE_GRACE_SECONDS = 1.0
    peer = HoldingPeer(lambda nth: FIRST_HELD_SECONDS if nth == 0 else 0.0)
    with peer.running(), sweeping_in_background():
        endpoint = fast_endpoint(
            peer.url, event_types=["order.created"], max_in_flight=2, read_timeout_seconds=20
        )
        other = fast_endpoint(receiver.url, event_types=["invoice.paid"])
        first = services.emit("order.created", {"n": 1})
        wait_until(lambda: len(peer.arrived) == 1, what="the first request")
        locked = endpoint if blocked == "its endpoint's row" else other
        with row_held(Endpoint, locked.pk, ROW_HELD_SECONDS):
            if locked is other:
                # The other endpoint's recording waits for the row; ours queues behind it.
                services.emit("invoice.paid", {"n": 1})
                wait_until(lambda: _waiting_for_a_lock() > 0, what="a recording waiting")
            services.emit("order.created", {"n": 2})
        assert eventually(
            lambda: Delivery.objects.filter(
                event=first, endpoint=endpoint, status=DeliveryStatus.SUCCEEDED
            ).exists(),
            60,
        ), "the first event was never delivered"

    assert peer.overlapping() == [], "a request sent again while the first was still open"


# --- item 8: a wake that comes while the endpoint is held ---------------------------------


@pytest.mark.timeout(90)
def test_a_wake_that_came_while_the_endpoint_was_held_is_worked_once_the_hold_ends(
    celery_worker: object, receiver: Receiver, settings: SettingsWrapper
) -> None:
    # Item 8: the wake of a row that came while the endpoint was held (`not_before`) found
    # the lease refused and left its mark: every wake after it was folded into that mark
    # for a minute, and nothing woke the endpoint when the hold ended.
    # A request with no answer holds the endpoint (no request for about as long as one
    # takes); its owner, with nothing else to send, gives the endpoint back with that hold.
    settings.WEBHOOKS_DEFER_SECONDS = 6.0
    endpoint = fast_endpoint(
        receiver.url, connect_timeout_seconds=1, read_timeout_seconds=1, max_attempts=1
    )
    receiver.script(Reply(delay_seconds=3))
    services.emit("order.created", {"n": 1})
    held = EndpointOwner.objects.filter(endpoint=endpoint, token=None, not_before__gt=Now())
    wait_until(held.exists, what="the endpoint given back with a hold")
    hold_ends = EndpointOwner.objects.get(endpoint=endpoint).not_before
    assert hold_ends is not None

    second = services.emit("order.created", {"n": 2})  # its wake finds the endpoint held

    patience = (hold_ends - timezone.now()).total_seconds() + 5
    assert eventually(
        lambda: Delivery.objects.filter(event=second, status=DeliveryStatus.SUCCEEDED).exists(),
        patience,
    ), f"not sent within 5 s of the hold's end (at {hold_ends:%H:%M:%S.%f})"


# --- item 6: an owner's turn has an overall bound ---------------------------------------

WORK_ENDPOINT_TASK = "deliveries.tasks.work_endpoint"


class TaskRuns:
    """How long each `work_endpoint` task of one endpoint ran, from the worker's task
    signals; those still running count until now."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint_id = str(endpoint.pk)
        self.lock = threading.Lock()
        self.started: dict[str, float] = {}
        self.durations: list[float] = []

    def _ours(self, task: Any, args: Any) -> bool:
        return getattr(task, "name", "") == WORK_ENDPOINT_TASK and list(args or [])[:1] == [
            self.endpoint_id
        ]

    def _prerun(self, task_id: str, task: Any, args: Any = None, **_: Any) -> None:
        if self._ours(task, args):
            with self.lock:
                self.started[task_id] = time.monotonic()

    def _postrun(self, task_id: str, task: Any, args: Any = None, **_: Any) -> None:
        if self._ours(task, args):
            with self.lock:
                started = self.started.pop(task_id, None)
                if started is not None:
                    self.durations.append(time.monotonic() - started)

    def longest(self) -> float:
        now = time.monotonic()
        with self.lock:
            return max([*self.durations, *(now - s for s in self.started.values())], default=0)

    @contextlib.contextmanager
    def watching(self) -> Iterator["TaskRuns"]:
        task_prerun.connect(self._prerun, weak=False)
        task_postrun.connect(self._postrun, weak=False)
        try:
            yield self
        finally:
            task_prerun.disconnect(self._prerun)
            task_postrun.disconnect(self._postrun)


LOAD_SECONDS = 15.0


@pytest.mark.timeout(120)
def test_an_owner_s_task_ends_within_its_turn_under_sustained_load(
    celery_worker: object, receiver: Receiver, settings: SettingsWrapper
) -> None:
    # Item 6: each take-back (rows came due as the owner stopped) started a new turn, so
    # a busy endpoint's owner ran until the task's hard time limit. Here a row stays due
    # that no claim can take (another transaction holds it), so the owner's every stop
    # finds work and takes the lease back, while a steady stream of rows comes in.
    settings.WEBHOOKS_DELIVERY_TURN_SECONDS = 1.0
    endpoint = fast_endpoint(receiver.url, max_in_flight=10)
    [locked] = delivery_rows(endpoint, 1)
    stop, held = threading.Event(), threading.Event()

    def hold_a_due_row() -> None:
        with transaction.atomic():
            Delivery.objects.select_for_update().get(pk=locked.pk)
            held.set()
            stop.wait(LOAD_SECONDS + 10)

    def feed() -> None:
        while not stop.wait(0.05):
            delivery_rows(endpoint, 3)

    holder = in_its_own_connection(hold_a_due_row)
    assert held.wait(10)
    with TaskRuns(endpoint).watching() as runs:
        feeder = in_its_own_connection(feed)
        services.wake_endpoints([endpoint.pk])
        try:
            # The load's length, not a wait for something to happen.
            assert not stop.wait(LOAD_SECONDS)
            longest = runs.longest()
        finally:
            stop.set()
            feeder.join(10)
            holder.join(10)

    # A turn (1 s) and its last requests (connect + read timeout: 3 s), with room for a
    # loaded machine: far less than the load's length. (When a take-back started a new
    # turn, the owner that followed the first empty claim's 5 s hold ran to the load's end.)
    assert longest < 6, f"a task of the endpoint's owner ran {longest:.0f} s"
