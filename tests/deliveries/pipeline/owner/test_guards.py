"""The owner's guards (issue 41): no request outlives its lease whatever the owner waits
on, no loop on a claim that takes nothing, permits given back on every path, a task's
turns bounded together, a wake that finds its endpoint held coming back, and a task's
outcomes bounded."""

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from unittest import mock

import psycopg
import pytest
from django.db import DatabaseError, connection
from django.db.models.functions import Now
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus, Endpoint, EndpointOwner, Event
from deliveries.pipeline.owner import endpoint_view, lanes, lease_rows, work
from deliveries.pipeline.owner import results as owner_results
from deliveries.pipeline.owner.results import WorkResult
from deliveries.pipeline.wake import wake_book, wake_endpoints
from tests.conftest import wait_until
from tests.fixtures import new_endpoint
from tests.helpers import read_until_closed
from tests.receiver import ReceivedRequest, Receiver, Reply
from webhooks_core.runtime.tasking import QUEUE_DELIVERY

pytestmark = pytest.mark.django_db(transaction=True)


def _due_row(endpoint: Endpoint) -> Delivery:
    event = Event.objects.create(
        type="order.created", data={}, occurred_at=timezone.now(), fanned_out_at=Now()
    )
    return Delivery.objects.create(event=event, endpoint=endpoint, next_attempt_at=Now())


def _in_a_thread(target: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # (reported to the test)
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


@contextmanager
def _silent_peer() -> Iterator[tuple[str, list[float], list[float]]]:
    """Reads each request and never answers; notes when each came and when the client
    let go of it (Unix times)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    opened: list[float] = []
    closed: list[float] = []
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            opened.append(time.time())
            read_until_closed(conn, stop)
            closed.append(time.time())

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # (closed)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook", opened, closed
    finally:
        stop.set()
        listener.close()


def _dsn() -> str:
    params = connection.get_connection_params()
    return psycopg.conninfo.make_conninfo(
        **{k: v for k, v in params.items() if k in ("dbname", "user", "host", "port", "password")}
    )


@pytest.mark.skipif("connection.vendor != 'postgresql'")
@pytest.mark.timeout(60)
def test_a_request_is_cut_before_the_lease_ends_when_the_renewal_is_blocked(
    settings: SettingsWrapper,
) -> None:
    # The owner's renewal waits on a row lock held by another transaction: nothing on the
    # owner's own path can cut its request, so without the guard it stayed open past the
    # lease, and a second owner could send the same row again meanwhile.
    settings.WEBHOOKS_LEASE_SECONDS = 3
    with _silent_peer() as (url, opened, closed):
        endpoint = new_endpoint(url, connect_timeout_seconds=5, read_timeout_seconds=30)
        _due_row(endpoint)
        thread, _ = _in_a_thread(lambda: services.endpoint_work(endpoint_id=endpoint.pk))
        wait_until(lambda: opened, timeout=10, what="the request to be open")
        with psycopg.connect(_dsn(), autocommit=False) as other:
            other.execute(
                f"SELECT 1 FROM {EndpointOwner._meta.db_table} WHERE endpoint_id = %s "  # noqa: S608
                "FOR UPDATE",
                [endpoint.pk],
            )
            expires_at = EndpointOwner.objects.get(endpoint=endpoint).expires_at
            assert expires_at is not None
            wait_until(lambda: closed, timeout=10, what="the request to be cut")
            other.rollback()
        thread.join(timeout=20)
    assert closed[0] < expires_at.timestamp(), "the request was cut before its lease ended"


@pytest.mark.timeout(60)
def test_a_request_is_cut_before_the_lease_ends_whatever_the_owner_waits_on(
    settings: SettingsWrapper,
) -> None:
    # A wait the owner cannot bound itself (a pooled connection's checkout, 60 s in the
    # Procfile; a resolver): the guard beside it cuts its requests before the lease ends.
    settings.WEBHOOKS_LEASE_SECONDS = 3
    real_renew = lease_rows.owner_renew

    def slow_renew(**kwargs: Any) -> bool:
        time.sleep(8)
        return real_renew(**kwargs)

    with (
        _silent_peer() as (url, opened, closed),
        mock.patch("deliveries.pipeline.owner.lease.owner_renew", slow_renew),
    ):
        endpoint = new_endpoint(url, connect_timeout_seconds=5, read_timeout_seconds=30)
        _due_row(endpoint)
        thread, _ = _in_a_thread(lambda: services.endpoint_work(endpoint_id=endpoint.pk))
        wait_until(lambda: opened, timeout=10, what="the request to be open")
        lease = EndpointOwner.objects.get(endpoint=endpoint)
        assert lease.expires_at is not None
        wait_until(lambda: closed, timeout=10, what="the request to be cut")
        thread.join(timeout=20)
    assert closed[0] < lease.expires_at.timestamp()


def test_a_claim_that_takes_nothing_while_rows_are_due_is_held_not_looped(
    receiver: Receiver,
) -> None:
    # A claim that disagrees with the look that counts due rows once made its owner take
    # the lease, claim nothing, release and look again without pause.
    endpoint = new_endpoint(receiver.url)
    _due_row(endpoint)
    takes = 0
    real_take = lease_rows.owner_take

    def counted_take(**kwargs: Any) -> uuid.UUID | None:
        nonlocal takes
        takes += 1
        return real_take(**kwargs)

    with (
        mock.patch.object(endpoint_view.EndpointView, "claim", return_value=[]),
        mock.patch("deliveries.pipeline.owner.lease.owner_take", counted_take),
        mock.patch("deliveries.pipeline.owner.work.wake_after_hold") as wakes_sent,
    ):
        thread, errors = _in_a_thread(lambda: services.endpoint_work(endpoint_id=endpoint.pk))
        thread.join(timeout=10)
    assert not thread.is_alive(), "the owner stopped"
    assert not errors
    assert takes <= 2
    lease = EndpointOwner.objects.get(endpoint=endpoint)
    assert lease.token is None
    assert lease.not_before is not None
    assert lease.not_before > timezone.now() + timedelta(seconds=2)
    # One wake, for the hold's end.
    wakes_sent.assert_called_once_with(str(endpoint.pk), work.EMPTY_CLAIM_HOLD_SECONDS)


def test_a_turn_that_waits_in_vain_for_permits_is_handed_on_not_held(
    receiver: Receiver, settings: SettingsWrapper
) -> None:
    # An owner whose last claim had run dry, and whose next turns found the process's
    # open requests all taken, ended as if a claim had taken nothing while rows were due:
    # its endpoint held 5 s, with a warning. And its wait in line lasted until its lease
    # was due for renewal (a third of it), not until its turn's end.
    settings.WEBHOOKS_DELIVERY_MAX_OPEN_REQUESTS = 2
    settings.WEBHOOKS_LEASE_SECONDS = 30.0  # renewed every 10 s
    settings.WEBHOOKS_DELIVERY_TURN_SECONDS = 1.0
    endpoint = new_endpoint(receiver.url)
    _due_row(endpoint)  # the first claim asks for 2 and takes 1: it runs dry
    taken = threading.Event()
    done = threading.Event()

    def take_the_permits() -> None:
        # In line before the owner's request ends: served its permits as that one's
        # come back, and keeps them until the test is done.
        count = lanes.acquire(2, timeout=30)
        taken.set()
        done.wait(30)
        lanes.release(count)

    taker = threading.Thread(target=take_the_permits, daemon=True)

    def first_request(request: ReceivedRequest) -> Reply:
        _due_row(endpoint)  # due when the owner looks again
        connection.close()
        taker.start()
        wait_until(lambda: len(lanes._line) > 0, timeout=10, what="the test in line")
        receiver.handler = None
        return Reply()

    receiver.handler = first_request
    try:
        with (
            # (Other tasks wait for the pool: a turn ends at its time.)
            mock.patch.object(work, "tasks_wait_for_a_slot", return_value=True),
            mock.patch("deliveries.pipeline.owner.work.wake_after_hold") as held_wakes,
            mock.patch("deliveries.pipeline.owner.work.wake_endpoints") as wakes,
        ):
            started = time.monotonic()
            result = services.endpoint_work(endpoint_id=endpoint.pk)
            took = time.monotonic() - started
        assert taken.is_set()
        # The turn (1 s), the first request, and room for a loaded machine: far less than
        # the lease's renewal.
        assert took < 6, f"the owner waited in line {took:.0f} s"
        assert result.sent == 1
        held_wakes.assert_not_called()
        wakes.assert_called_once_with([str(endpoint.pk)], countdown=0.0)
        lease = EndpointOwner.objects.get(endpoint=endpoint)
        assert lease.token is None
        assert lease.not_before is None or lease.not_before <= timezone.now()
    finally:
        done.set()
        if taker.is_alive():
            taker.join(timeout=35)  # (its permits back for the tests after)


@pytest.mark.parametrize("others_wait", [True, False], ids=["others wait", "none waits"])
def test_a_wait_in_line_ends_at_the_turn_s_end_only_when_a_hand_on_follows(
    settings: SettingsWrapper, others_wait: bool
) -> None:
    # With no task waiting for the pool the turn goes on at its end: an owner that left
    # the line then would only rejoin it at the back (and give the head's permits away).
    settings.WEBHOOKS_LEASE_SECONDS = 30.0  # renewed every 10 s
    owner = work.Owner(str(uuid.uuid4()), uuid.uuid4(), WorkResult())
    owner.turn_ends = time.monotonic() + 1.0
    with mock.patch.object(work, "tasks_wait_for_a_slot", return_value=others_wait):
        wait = owner._line_wait()
    assert wait <= 1.0 if others_wait else wait > 9.0


def test_permits_come_back_when_preparing_a_round_fails(receiver: Receiver) -> None:
    # An error after the claim (its credentials: a database error, an undecryptable
    # secret) kept the claimed rows' permits for ever, until no owner could send.
    endpoint = new_endpoint(receiver.url)
    for _ in range(3):
        _due_row(endpoint)
    before = lanes.open_requests()
    with (
        mock.patch.object(
            endpoint_view.EndpointView, "credentials", side_effect=DatabaseError("gone")
        ),
        pytest.raises(DatabaseError),
    ):
        services.endpoint_work(endpoint_id=endpoint.pk)
    assert lanes.open_requests() == before


@pytest.mark.timeout(60)
def test_a_task_ends_on_time_however_often_its_look_finds_more(
    settings: SettingsWrapper, receiver: Receiver
) -> None:
    # Each take-back at the end of a turn started the turn's clock again, so a busy
    # endpoint's owner ran until the task's hard time limit killed it mid-request.
    settings.WEBHOOKS_DELIVERY_TURN_SECONDS = 0.2
    endpoint = new_endpoint(receiver.url)
    _due_row(endpoint)
    stop = threading.Event()

    def feed() -> None:
        while not stop.is_set():
            _due_row(endpoint)
            time.sleep(0.02)

    feeder, _ = _in_a_thread(feed)
    try:
        with (
            mock.patch.object(work, "MAX_TASK_SECONDS", 2.0),
            mock.patch.object(work, "tasks_wait_for_a_slot", return_value=False),
            mock.patch("deliveries.pipeline.owner.work.wake_endpoints"),
        ):
            started = time.monotonic()
            services.endpoint_work(endpoint_id=endpoint.pk)
            took = time.monotonic() - started
    finally:
        stop.set()
        feeder.join(timeout=5)
    assert took < 10


@pytest.mark.worker
def test_a_wake_that_finds_the_endpoint_held_comes_back_when_the_hold_ends(
    celery_worker: Any, receiver: Receiver
) -> None:
    # The wake's mark ("due now") outlived the hold by a minute and folded every wake
    # meanwhile: the next send came up to ~75 s late.
    endpoint = new_endpoint(receiver.url)
    delivery = _due_row(endpoint)
    lease_rows.owner_take(endpoint_id=endpoint.pk)
    EndpointOwner.objects.filter(endpoint=endpoint).update(
        token=None, expires_at=None, not_before=Now() + timedelta(seconds=2)
    )
    assert wake_book().mark(str(endpoint.pk), 0, 60, -1)  # a wake came meanwhile

    result = services.endpoint_work(endpoint_id=endpoint.pk)  # its message: held

    assert not result.owned
    wait_until(
        lambda: Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.SUCCEEDED,
        timeout=15,
        what="the delivery to be sent once the hold ended",
    )


def test_the_wakes_of_a_held_endpoint_are_folded_until_its_hold_ends(redis_client: Any) -> None:
    # Each event's wake sent a message that found the hold and sent one more for its end:
    # two messages and a task per event, which slowed the healthy endpoints beside it.
    redis_client.flushdb()
    endpoint = new_endpoint("http://127.0.0.1:9/held")
    _due_row(endpoint)
    lease_rows.owner_take(endpoint_id=endpoint.pk)
    EndpointOwner.objects.filter(endpoint=endpoint).update(
        token=None, expires_at=None, not_before=Now() + timedelta(seconds=30)
    )
    try:
        assert not services.endpoint_work(endpoint_id=endpoint.pk).owned  # held: comes back
        assert redis_client.llen(QUEUE_DELIVERY) == 1  # the message for the hold's end
        assert [wake_endpoints([endpoint.pk]) for _ in range(10)] == [0] * 10
        assert redis_client.llen(QUEUE_DELIVERY) == 1
    finally:
        redis_client.flushdb()  # the message for the hold's end: no worker of a later test


def test_a_task_keeps_a_bounded_number_of_outcomes() -> None:
    result = WorkResult(watch=7)
    result.note({7: "succeeded"})
    for start in range(0, 5000, 100):
        result.note({pk: "succeeded" for pk in range(start + 100, start + 200)})
    assert len(result.outcomes) <= owner_results.KEPT_OUTCOMES
    assert result.outcomes[7] == "succeeded"


def test_a_fan_out_goes_on_when_an_endpoint_it_read_is_deleted_before_its_commit(
    receiver: Receiver,
) -> None:
    # The deleted endpoint's new delivery failed the fan-out's commit (its foreign key):
    # every other endpoint's delivery of those events waited for the sweeper.
    from deliveries.pipeline import fanout

    kept, gone = new_endpoint(receiver.url), new_endpoint(receiver.url)
    event = Event.objects.create(type="order.created", data={}, occurred_at=timezone.now())
    real = fanout._deliveries_of
    deleted: list[bool] = []

    def deliveries_then_delete(*args: Any, **kwargs: Any) -> list[Delivery]:
        made = real(*args, **kwargs)
        if not deleted:
            thread, errors = _in_a_thread(lambda: services.endpoint_delete(endpoint_id=gone.pk))
            thread.join(timeout=10)
            assert not errors
            deleted.append(True)
        return made

    with mock.patch.object(fanout, "_deliveries_of", deliveries_then_delete):
        created = services.event_fan_out(event_id=event.pk)

    assert created == 1
    assert list(Delivery.objects.values_list("endpoint_id", flat=True)) == [kept.pk]
    assert not Endpoint.objects.filter(pk=gone.pk).exists()


def test_deleting_an_endpoint_while_deliveries_are_added_to_it_succeeds(
    receiver: Receiver,
) -> None:
    # Under load a fan-out committed a delivery of the endpoint while its deletion ran
    # (after the rows to delete were collected): the deletion's commit failed its foreign
    # key and DELETE /api/v1/endpoints answered 500.
    from django.db.models import deletion

    endpoint = new_endpoint(receiver.url)
    _due_row(endpoint)
    real = deletion.Collector.delete
    added: list[bool] = []

    def another_commits_then_delete(collector: Any) -> Any:
        if not added:
            thread, errors = _in_a_thread(lambda: _due_row(endpoint))
            thread.join(timeout=10)
            assert not errors
            added.append(True)
        return real(collector)

    with mock.patch.object(deletion.Collector, "delete", another_commits_then_delete):
        services.endpoint_delete(endpoint_id=endpoint.pk)

    assert added
    assert not Endpoint.objects.filter(pk=endpoint.pk).exists()
    assert not Delivery.objects.filter(endpoint_id=endpoint.pk).exists()
