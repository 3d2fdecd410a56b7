"""Processing on the real stack: Redis, a real worker, PostgreSQL; failures from 003.

Concurrent duplicates and a real SIGKILL after the business effect are in the
fault-injection suite (tests/faults/test_receiving.py).
"""

import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import redis
from django.test import Client
from django.utils import timezone
from prometheus_client import REGISTRY

from examples.payments.models import Order, OrderStatus, Payment, PaymentStatus, PaymentTransition
from receivers import services
from receivers.handlers import inbox_handler, registry
from receivers.models import InboxEvent, InboxStatus, Source
from receivers.services import InboxOutcome, dispatch, lease_keeper
from tests.conftest import wait_until
from tests.fixtures import MakeSource
from tests.helpers import declare_queues, sweeping_in_background, worker_process
from tests.receivers import slow_handlers
from tests.receivers.conftest import post
from tests.receivers.helpers import ours_event, sign_ours
from webhooks_project.celery import app as celery_app

worker = pytest.mark.django_db(transaction=True)


def send(client: Client, source: Source, secret: str, event_type: str, **data: Any) -> str:
    event_id = data.pop("event_id", None) or str(uuid.uuid4())
    body = ours_event(event_type, data, event_id=event_id)
    response = post(client, source.slug, body, sign_ours([secret], body))
    assert response.status_code == 200, response.content
    return event_id


def status_of(source: Source, event_id: str) -> str:
    return InboxEvent.objects.get(source=source, event_id=event_id).status


def wait_status(source: Source, event_id: str, *wanted: str, timeout: float = 20.0) -> None:
    wait_until(lambda: status_of(source, event_id) in wanted, timeout, f"{event_id} {wanted}")


def payment_data(version: int, payment_id: str = "pay_1", **extra: Any) -> dict[str, Any]:
    return {
        "payment_id": payment_id,
        "order": "ord_52",
        "amount": 500000,
        "currency": "RUB",
        "version": version,
        **extra,
    }


@pytest.fixture
def order(transactional_db: None) -> Order:
    return Order.objects.create(reference="ord_52", amount=500000, currency="RUB")


@pytest.fixture
def failing_handler() -> Iterator[dict[str, int]]:
    calls = {"n": 0, "fail_until": 1_000}

    @inbox_handler("test.flaky")
    def flaky(event: InboxEvent) -> None:
        calls["n"] += 1
        if calls["n"] <= calls["fail_until"]:
            raise RuntimeError(f"downstream unavailable (call {calls['n']})")

    yield calls
    registry.unregister("test.flaky")


@worker
def test_event_is_processed_after_the_response(
    celery_worker: object, make_source: MakeSource, order: Order
) -> None:
    source, secret = make_source()
    client = Client()
    created = send(client, source, secret, "payment.created", **payment_data(1))
    succeeded = send(client, source, secret, "payment.succeeded", **payment_data(2))

    wait_status(source, succeeded, InboxStatus.PROCESSED)
    assert status_of(source, created) == InboxStatus.PROCESSED
    row = InboxEvent.objects.get(event_id=succeeded)
    assert row.attempts == 1
    assert row.processed_at is not None
    order.refresh_from_db()
    assert order.status == OrderStatus.PAID


@worker
def test_sequential_duplicate_two_2xx_one_effect(
    celery_worker: object, make_source: MakeSource, order: Order
) -> None:
    source, secret = make_source()
    client = Client()
    send(client, source, secret, "payment.created", **payment_data(1))
    event_id = send(client, source, secret, "payment.succeeded", **payment_data(2))
    wait_status(source, event_id, InboxStatus.PROCESSED)
    send(client, source, secret, "payment.succeeded", event_id=event_id, **payment_data(2))
    # A different event describing the same fact (the provider sent it twice).
    other = send(client, source, secret, "payment.succeeded", **payment_data(2))
    wait_status(source, other, InboxStatus.PROCESSED)

    assert InboxEvent.objects.filter(event_id=event_id).get().attempts == 1
    assert PaymentTransition.objects.filter(to_status="succeeded").count() == 1
    assert Payment.objects.count() == 1


@worker
def test_unknown_type_is_acknowledged_and_ignored(
    celery_worker: object, make_source: MakeSource
) -> None:
    source, secret = make_source()
    event_id = send(Client(), source, secret, "future.event", anything=True)
    wait_status(source, event_id, InboxStatus.IGNORED)
    assert "no handler" in InboxEvent.objects.get(event_id=event_id).last_error
    # The queue is not broken: the next event is processed normally.
    Order.objects.create(reference="ord_52", amount=500000, currency="RUB")
    nxt = send(Client(), source, secret, "payment.created", **payment_data(1))
    wait_status(source, nxt, InboxStatus.PROCESSED)


@worker
def test_handler_failure_retries_then_succeeds(
    celery_worker: object, make_source: MakeSource, quick_retries: None, failing_handler: dict
) -> None:
    failing_handler["fail_until"] = 2
    source, secret = make_source()
    event_id = send(Client(), source, secret, "test.flaky")
    wait_status(source, event_id, InboxStatus.PROCESSED)
    row = InboxEvent.objects.get(event_id=event_id)
    assert row.attempts == 3
    assert row.last_error == ""


@worker
def test_handler_failure_ends_failed_then_manual_retry_processes(
    celery_worker: object, make_source: MakeSource, quick_retries: None, failing_handler: dict
) -> None:
    source, secret = make_source()
    event_id = send(Client(), source, secret, "test.flaky")
    wait_status(source, event_id, InboxStatus.FAILED)
    row = InboxEvent.objects.get(event_id=event_id)
    assert row.attempts == 3  # RECEIVERS_MAX_ATTEMPTS
    assert "downstream unavailable" in row.last_error
    assert "Traceback" in row.last_traceback
    time.sleep(0.5)
    assert status_of(source, event_id) == InboxStatus.FAILED  # terminal: no more attempts

    # The provider redelivers: still a duplicate, still failed (arrival dedupe).
    body = ours_event("test.flaky", {}, event_id=event_id)
    assert post(Client(), source.slug, body, sign_ours([secret], body)).json() == {
        "status": "duplicate"
    }
    # An operator retries once the downstream is back: the dedupe does not block it.
    failing_handler["fail_until"] = 0
    services.inbox_retry(inbox_id=row.pk)
    wait_status(source, event_id, InboxStatus.PROCESSED)
    assert InboxEvent.objects.get(event_id=event_id).attempts == 4


@worker
def test_crash_after_inbox_commit_is_processed_after_restart(
    request: pytest.FixtureRequest,
    redis_client: redis.Redis,
    make_source: MakeSource,
    order: Order,
    quick_retries: None,
) -> None:
    # No worker is running: the event is committed and acknowledged...
    source, secret = make_source()
    event_id = send(Client(), source, secret, "payment.created", **payment_data(1))
    assert status_of(source, event_id) == InboxStatus.RECEIVED
    # ...its task message is sent (from the view's sender thread)...
    assert dispatch.flush_pending()
    # ...and then the worker dies and Redis loses the task message with it.
    redis_client.flushdb()

    request.getfixturevalue("celery_worker")  # the worker comes back
    assert services.inbox_sweep().due == 1  # beat's sweeper finds the row
    wait_status(source, event_id, InboxStatus.PROCESSED)
    assert Payment.objects.count() == 1


@worker
def test_worker_killed_mid_processing_is_taken_over_after_the_lease(
    celery_worker: object, make_source: MakeSource, order: Order, quick_retries: None
) -> None:
    source, _ = make_source()
    event_id = str(uuid.uuid4())
    body = ours_event("payment.created", payment_data(1), event_id=event_id)
    # A worker claimed the event and was killed before finishing (nothing committed).
    services_arrival_claimed(source, body, event_id)

    assert services.inbox_sweep().leases_expired == 1
    wait_status(source, event_id, InboxStatus.PROCESSED)
    assert InboxEvent.objects.get(event_id=event_id).attempts == 2
    assert Payment.objects.count() == 1


@worker
def test_crash_after_business_effect_has_no_second_effect(
    celery_worker: object, make_source: MakeSource, order: Order, quick_retries: None
) -> None:
    """The handler's effect committed, then the worker died before the inbox row said so:
    the row is still `processing`. The takeover runs the handler again; no second effect."""
    from examples.payments.handlers import facts_from
    from examples.payments.payments import payment_apply_state

    source, secret = make_source()
    send(Client(), source, secret, "payment.created", **payment_data(1))
    wait_until(lambda: Payment.objects.exists(), what="payment registered")
    event_id = str(uuid.uuid4())
    body = ours_event("payment.succeeded", payment_data(2), event_id=event_id)
    services_arrival_claimed(source, body, event_id)
    row = InboxEvent.objects.get(event_id=event_id)
    # The dead worker's effect, committed:
    payment_apply_state(source_id=source.pk, facts=facts_from(row), via="webhook")
    assert PaymentTransition.objects.filter(to_status="succeeded").count() == 1

    assert services.inbox_sweep().leases_expired == 1
    wait_status(source, event_id, InboxStatus.PROCESSED)
    assert PaymentTransition.objects.filter(to_status="succeeded").count() == 1
    order.refresh_from_db()
    assert order.status == OrderStatus.PAID


def services_arrival_claimed(source: Source, body: bytes, event_id: str) -> None:
    """Store an event as a worker that claimed it and then died would have left it."""
    import json

    now = timezone.now()
    InboxEvent.objects.create(
        source=source,
        event_id=event_id,
        type=json.loads(body)["type"],
        status=InboxStatus.PROCESSING,
        attempts=1,
        raw_body=body,
        payload=json.loads(body),
        received_at=now,
        next_attempt_at=now,
        dispatched_at=now - timedelta(seconds=10),
        lease_token=uuid.uuid4(),
        lease_expires_at=now - timedelta(seconds=1),
    )


@worker
def test_out_of_order_versions_end_at_the_newest(
    celery_worker: object, make_source: MakeSource, order: Order
) -> None:
    source, secret = make_source()
    client = Client()
    created = send(client, source, secret, "payment.created", **payment_data(1))
    wait_status(source, created, InboxStatus.PROCESSED)
    newer = send(client, source, secret, "payment.succeeded", **payment_data(11))
    wait_status(source, newer, InboxStatus.PROCESSED)
    older = send(client, source, secret, "payment.processing", **payment_data(10))
    wait_status(source, older, InboxStatus.PROCESSED)

    payment = Payment.objects.get()
    assert (payment.status, payment.version) == (PaymentStatus.SUCCEEDED, 11)
    assert list(PaymentTransition.objects.values_list("to_status", flat=True)) == ["succeeded"]


@worker
def test_missing_predecessor_is_retried_until_it_arrives(
    celery_worker: object, make_source: MakeSource, order: Order, quick_retries: None, settings: Any
) -> None:
    settings.RECEIVERS_MAX_ATTEMPTS = 50
    source, secret = make_source()
    client = Client()
    paid = send(client, source, secret, "payment.succeeded", **payment_data(2))
    wait_until(lambda: InboxEvent.objects.get(event_id=paid).attempts >= 2, what="a retry of paid")
    row = InboxEvent.objects.get(event_id=paid)
    assert row.status in (InboxStatus.RETRYING, InboxStatus.PROCESSING)
    assert "predecessor" in row.last_error or row.status == InboxStatus.PROCESSING

    send(client, source, secret, "payment.created", **payment_data(1))
    wait_status(source, paid, InboxStatus.PROCESSED)
    assert Payment.objects.get().status == PaymentStatus.SUCCEEDED


@worker
def test_same_timestamp_different_ids_are_both_processed(
    celery_worker: object, make_source: MakeSource
) -> None:
    Order.objects.create(reference="ord_52", amount=500000, currency="RUB")
    source, secret = make_source()
    ts = int(time.time())
    ids = []
    for payment_id in ("pay_a", "pay_b"):
        event_id = str(uuid.uuid4())
        body = ours_event("payment.created", payment_data(1, payment_id), event_id=event_id)
        post(Client(), source.slug, body, sign_ours([secret], body, timestamp=ts))
        ids.append(event_id)
    for event_id in ids:
        wait_status(source, event_id, InboxStatus.PROCESSED)
    assert Payment.objects.count() == 2


@worker
def test_amount_mismatch_fails_at_once(
    celery_worker: object, make_source: MakeSource, order: Order, quick_retries: None
) -> None:
    source, secret = make_source()
    event_id = send(Client(), source, secret, "payment.created", **payment_data(1, amount=1))
    wait_status(source, event_id, InboxStatus.FAILED)
    row = InboxEvent.objects.get(event_id=event_id)
    assert row.attempts == 1
    assert "amount" in row.last_error
    assert not Payment.objects.exists()


@worker
def test_worker_sigkilled_mid_handler_processes_exactly_once_after_restart(
    redis_client: redis.Redis,
    make_source: MakeSource,
    settings: Any,
    tmp_path: Any,
) -> None:
    """Crash after inbox commit, for real: a separate `celery worker` process is killed
    with SIGKILL while the handler runs. After a restart and the sweeper, the event is
    processed, and its effect exists once."""
    redis_client.flushdb()
    declare_queues()  # the event is sent before the worker starts
    # The sweeper runs in this process; the lease is taken by the worker process.
    settings.RECEIVERS_REDISPATCH_GRACE_SECONDS = 1.0
    marker = tmp_path / "handler-starts.log"
    worker_env = {
        "RECEIVERS_HANDLER_MODULES": f"examples.payments.handlers,{slow_handlers.__name__}",
        "RECEIVERS_LEASE_SECONDS": "3",
        slow_handlers.MARKER_ENV: str(marker),
    }
    source, secret = make_source()
    event_id = send(Client(), source, secret, slow_handlers.EVENT_TYPE)
    effects = Order.objects.filter(reference__startswith=f"effect-{event_id[:40]}-")

    def starts() -> list[str]:
        return marker.read_text().splitlines() if marker.exists() else []

    with worker_process(worker_env) as doomed:
        # Beat's sweeper stands in for a first message that went astray; it stops before
        # the lease can expire, so the handler that starts is the one killed.
        with sweeping_in_background(sweeps=[services.inbox_sweep]):
            wait_until(lambda: starts(), timeout=60, what="the handler to start")
        os.kill(doomed.pid, signal.SIGKILL)  # mid-handler: lease held, message unacked
        doomed.wait()
    assert starts() == [f"{event_id} attempt 1"]
    assert status_of(source, event_id) == InboxStatus.PROCESSING
    assert not effects.exists(), "the killed run's transaction must not have committed"

    with (
        worker_process(worker_env),
        sweeping_in_background(sweeps=[services.inbox_sweep]),
    ):
        wait_status(source, event_id, InboxStatus.PROCESSED, timeout=90)
        time.sleep(1.0)  # room for a duplicate run, if there were one
    assert effects.count() == 1
    assert starts() == [f"{event_id} attempt 1", f"{event_id} attempt 2"]
    row = InboxEvent.objects.get(source=source, event_id=event_id)
    assert row.attempts == 2
    assert row.last_error == ""


class Runs:
    """What a test's handler did, seen from the worker's threads: how many runs started,
    ended and overlapped; each run waits for `release` (the test lets it go)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = self.ended = self.active = self.most_at_once = 0
        self.first_lease: tuple[uuid.UUID | None, datetime | None] = (None, None)
        self.release = threading.Event()

    @contextlib.contextmanager
    def running(self, event: InboxEvent) -> Iterator[None]:
        with self.lock:
            self.started += 1
            self.active += 1
            self.most_at_once = max(self.most_at_once, self.active)
            if self.started == 1:
                self.first_lease = (event.lease_token, event.lease_expires_at)
        try:
            yield
        finally:
            with self.lock:
                self.active -= 1
                self.ended += 1


@pytest.fixture
def runs() -> Iterator[Runs]:
    runs = Runs()
    yield runs
    runs.release.set()  # the worker's threads end before it stops
    registry.unregister("test.long")


def lease_of(source: Source, event_id: str) -> tuple[uuid.UUID | None, datetime | None]:
    row = InboxEvent.objects.get(source=source, event_id=event_id)
    return row.lease_token, row.lease_expires_at


def processing_count(source: Source, outcome: str) -> float:
    labels = {"source": source.slug, "outcome": outcome}
    return REGISTRY.get_sample_value("receivers_processing_total", labels) or 0.0


@worker
def test_a_handler_longer_than_its_lease_runs_once_and_keeps_its_lease(
    celery_worker: object, make_source: MakeSource, settings: Any, runs: Runs
) -> None:
    settings.RECEIVERS_LEASE_SECONDS = 1.0
    settings.RECEIVERS_HANDLER_TIMEOUT_SECONDS = 60.0
    settings.RECEIVERS_REDISPATCH_GRACE_SECONDS = 0.0

    @inbox_handler("test.long")
    def long(event: InboxEvent) -> None:
        with runs.running(event):
            runs.release.wait(30)

    source, secret = make_source()
    with sweeping_in_background(interval=0.2, sweeps=[services.inbox_sweep]):
        event_id = send(Client(), source, secret, "test.long")
        wait_until(lambda: runs.started, what="the handler to start")
        token, first = runs.first_lease
        assert token is not None
        assert first is not None
        # Three leases' worth of run, with the sweeper looking every fifth of one: the
        # first run's lease (its token) moved on with it, and no second run started.
        renewed = first + timedelta(seconds=2 * settings.RECEIVERS_LEASE_SECONDS)

        def renewed_for_the_first_run() -> bool:
            now_token, expiry = lease_of(source, event_id)
            assert now_token == token, "the row was claimed again"
            return expiry is not None and expiry >= renewed

        wait_until(renewed_for_the_first_run, what="the lease to be renewed")
        assert status_of(source, event_id) == InboxStatus.PROCESSING
        runs.release.set()
        wait_status(source, event_id, InboxStatus.PROCESSED)

    assert (runs.started, runs.most_at_once) == (1, 1)
    row = InboxEvent.objects.get(source=source, event_id=event_id)
    assert row.attempts == 1
    assert row.lease_token is None


@worker
def test_a_handler_that_always_overruns_its_bound_ends_failed(
    celery_worker: object, make_source: MakeSource, quick_retries: None, settings: Any, runs: Runs
) -> None:
    settings.RECEIVERS_HANDLER_TIMEOUT_SECONDS = 0.5  # the lease is 1 s, three attempts

    @inbox_handler("test.long")
    def long(event: InboxEvent) -> None:
        with runs.running(event):
            Order.objects.create(reference=f"effect-{event.attempts}", amount=1, currency="EUR")
            runs.release.wait(30)

    source, secret = make_source()
    with sweeping_in_background(interval=0.2, sweeps=[services.inbox_sweep]):
        event_id = send(Client(), source, secret, "test.long")
        wait_status(source, event_id, InboxStatus.FAILED)
        row = InboxEvent.objects.get(source=source, event_id=event_id)
        assert row.attempts == 3  # RECEIVERS_MAX_ATTEMPTS
        assert "RECEIVERS_HANDLER_TIMEOUT_SECONDS" in row.last_error
        assert "Stack of the handler at its bound" in row.last_traceback
        assert "runs.release.wait" in row.last_traceback  # where it was

        # The late runs end: each one's transaction rolls back, its effect with it.
        runs.release.set()
        wait_until(
            lambda: processing_count(source, services.InboxOutcome.LEASE_LOST) == 3,
            what="the three late runs to roll back",
        )
    assert runs.started == 3
    assert not Order.objects.filter(reference__startswith="effect-").exists()
    assert services.inbox_sweep() == services.InboxSweepResult()  # nothing more to do
    assert status_of(source, event_id) == InboxStatus.FAILED


def test_a_run_that_never_ended_with_its_attempts_spent_ends_failed(
    make_source: MakeSource, quick_retries: None
) -> None:
    """The attempt counts when it is claimed: a worker that dies in every attempt (a
    handler that kills it, a prefork hard time limit) spends them too."""
    source, _ = make_source()
    event_id = str(uuid.uuid4())
    services_arrival_claimed(source, ours_event("payment.created", {}, event_id=event_id), event_id)
    row = InboxEvent.objects.get(source=source, event_id=event_id)
    row.attempts = 3  # RECEIVERS_MAX_ATTEMPTS, the last of them never ended
    row.save(update_fields=["attempts"])

    assert services.inbox_claim(inbox_id=row.pk) is None
    swept = services.inbox_sweep()
    assert (swept.attempts_spent, swept.leases_expired) == (1, 0)
    row.refresh_from_db()
    assert (row.status, row.attempts, row.lease_token) == (InboxStatus.FAILED, 3, None)
    assert "never ended" in row.last_error


@worker
def test_the_prefork_pool_stops_a_handler_past_its_bound(
    redis_client: redis.Redis, make_source: MakeSource, tmp_path: Any
) -> None:
    """On prefork the attempt fails at its bound (the keeper, in the worker's child) and
    the processing task's soft time limit, derived from the bound, stops the handler:
    the host's task-wide limits (the reference deployment's 60 s) do not decide."""
    redis_client.flushdb()
    declare_queues()  # the event is sent before the worker starts
    marker = tmp_path / "overrun.log"
    worker_env = {
        "RECEIVERS_HANDLER_MODULES": slow_handlers.__name__,
        "RECEIVERS_HANDLER_TIMEOUT_SECONDS": "1",
        "RECEIVERS_LEASE_SECONDS": "2",
        "RECEIVERS_MAX_ATTEMPTS": "1",
        slow_handlers.MARKER_ENV: str(marker),
    }
    # This process knows the task, with the limits of its own (default) bound, as a web
    # process does: they must not travel with the message.
    assert dispatch.PROCESS_TASK in celery_app.tasks
    source, secret = make_source()
    event_id = send(Client(), source, secret, slow_handlers.OVERRUN_TYPE)

    def notes() -> list[str]:
        return marker.read_text().splitlines() if marker.exists() else []

    with worker_process(worker_env, pool="prefork", concurrency=1):
        wait_until(notes, timeout=60, what="the handler to start")
        wait_status(source, event_id, InboxStatus.FAILED, timeout=15)
        started = time.monotonic()
        wait_until(lambda: len(notes()) == 2, timeout=45, what="the soft time limit")
        stopped_after = time.monotonic() - started
    assert notes() == [f"{event_id} started", f"{event_id} stopped"]
    soft_limit, _ = lease_keeper.task_time_limits(1.0)
    assert stopped_after < soft_limit + 10  # not the host's task-wide 60 s
    row = InboxEvent.objects.get(source=source, event_id=event_id)
    assert (row.status, row.attempts) == (InboxStatus.FAILED, 1)
    assert "RECEIVERS_HANDLER_TIMEOUT_SECONDS" in row.last_error


@worker
def test_a_batch_hands_on_the_rows_it_has_no_time_left_to_start(
    celery_worker: object, make_source: MakeSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each handler of a batch starts with its whole bound before the task's soft time
    limit: past `HAND_ON_AFTER_SECONDS` the rest go on in a new message."""
    monkeypatch.setattr(lease_keeper, "HAND_ON_AFTER_SECONDS", 0.0)
    source, _ = make_source()
    now = timezone.now()
    rows = [
        InboxEvent.objects.create(
            source=source,
            event_id=str(uuid.uuid4()),
            type="future.event",
            received_at=now,
            next_attempt_at=now,
            dispatched_at=now,
        )
        for _ in range(3)
    ]
    ids = [str(row.pk) for row in rows]
    assert services.inbox_process_many(inbox_ids=ids) == [InboxOutcome.IGNORED]
    for row in rows[1:]:  # handed on, and processed by the worker from there
        wait_status(source, row.event_id, InboxStatus.IGNORED)
