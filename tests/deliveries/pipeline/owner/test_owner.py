"""The sending engine's owner protocol on the real stack: one owner per endpoint, wakes that
name no rows, a total deadline per request, and the defects found in the engine before
this one, each with a test that failed on that engine."""

import contextlib
import json
import socket
import threading
import time
import uuid
from collections.abc import Collection, Iterator
from datetime import timedelta
from typing import Any, Self
from unittest import mock

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.models.functions import Now
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from deliveries import metrics, services
from deliveries.destinations import Credentials, Kind, Outcome
from deliveries.destinations.http_client import transport
from deliveries.models import (
    Attempt,
    CircuitState,
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointOwner,
    EndpointState,
    Event,
)
from deliveries.pipeline.owner import claims, lease_rows
from deliveries.pipeline.owner import requests as owner_requests
from deliveries.pipeline.owner import results as owner_results
from deliveries.pipeline.owner import settling as owner_settling
from deliveries.pipeline.owner import work as owner_work
from deliveries.pipeline.owner import writing as owner_writing
from deliveries.pipeline.owner.results import result_of as _result
from tests.conftest import wait_until
from tests.deliveries.helpers import delivery_row, in_its_own_connection, owner_at_work
from tests.fixtures import make_endpoint
from tests.receiver import Receiver, Reply

# Written for events fanned out by the emitting process (no worker runs here).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("inline_fan_out")]


def published_wakes() -> float:
    return metrics.wakes_total.labels(result="dispatched")._value.get()


def statuses(endpoint: Endpoint) -> set[str]:
    return set(Delivery.objects.filter(endpoint=endpoint).values_list("status", flat=True))


# --- a receiver that trickles its answer ------------------------------------------------


@contextlib.contextmanager
def trickling_server(byte_every: float = 0.3) -> Iterator[tuple[str, list[float]]]:
    """Answers every request one byte every `byte_every` seconds, for ever: each read
    returns well within any read timeout, so only a total deadline ends the request."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    accepted: list[float] = []
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            with contextlib.suppress(OSError):
                conn.recv(65536)
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 1000:
                    if stop.is_set():
                        return
                    conn.send(bytes([byte]))
                    time.sleep(byte_every)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            accepted.append(time.monotonic())
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook", accepted
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()


def test_a_trickling_answer_ends_at_connect_plus_read_timeout_in_total() -> None:
    with trickling_server() as (url, _):
        started = time.monotonic()
        result = transport.post(url, b"{}", {}, connect_timeout=0.5, read_timeout=1.0)
        took = time.monotonic() - started

    assert result.status_code is None or result.error
    assert "total deadline" in result.error
    assert took < 1.5 + 1.0, f"the request took {took:.1f} s"


def test_a_request_cut_before_it_started_sends_nothing(receiver: Receiver) -> None:
    # A cut (an owner stopping) that came before the request's socket existed could not
    # shut anything, and nothing checked it after: the request went out all the same.
    deadline = transport.deadlines.after(30)
    deadline.cut()

    result = transport.post(
        receiver.url, b"{}", {}, connect_timeout=5, read_timeout=5, deadline=deadline
    )

    assert result.status_code is None
    assert "total deadline" in result.error
    assert receiver.requests == []


def test_a_trickled_attempt_is_recorded_as_a_timeout_and_not_sent_before_its_retry(
    celery_worker: object, receiver: Receiver
) -> None:
    with trickling_server() as (url, accepted):
        endpoint, _ = services.endpoint_create(
            url=url,
            event_types=["*"],
            connect_timeout_seconds=0.5,
            read_timeout_seconds=1.0,
            backoff_base_seconds=30,
            backoff_max_seconds=60,
        )
        started = time.monotonic()
        event = services.emit("order.created", {"n": 1})
        wait_until(
            lambda: Attempt.objects.filter(delivery__event=event).exists(),
            timeout=10,
            what="the attempt to be recorded",
        )
        recorded_after = time.monotonic() - started
        attempt = Attempt.objects.get(delivery__event=event)
        delivery = Delivery.objects.get(event=event)
        time.sleep(1.0)  # would the lease run out and the row go out again?
        assert len(accepted) == 1
    assert recorded_after < 1.5 + 3.0
    assert attempt.response_status is None
    assert "total deadline" in attempt.error
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.next_attempt_at is not None
    assert delivery.next_attempt_at > timezone.now() + timedelta(seconds=20)
    assert endpoint.pk == delivery.endpoint_id


# --- one owner, few messages ------------------------------------------------------------


@pytest.mark.usefixtures("lease_sql")
def test_a_second_owner_is_refused_while_the_first_holds_the_lease(receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver)
    first = lease_rows.owner_take(endpoint_id=endpoint.pk)
    assert first is not None
    assert lease_rows.owner_take(endpoint_id=endpoint.pk) is None
    lease_rows.owner_release(endpoint_id=endpoint.pk, token=first)
    assert lease_rows.owner_take(endpoint_id=endpoint.pk) is not None


@pytest.fixture(params=["written SQL", "ORM"])
def lease_sql(request: pytest.FixtureRequest) -> Iterator[None]:
    """The lease's take and release as PostgreSQL runs them, and as other databases do."""
    with mock.patch.object(lease_rows, "_written_sql", return_value=request.param != "ORM"):
        yield


@pytest.mark.usefixtures("lease_sql")
def test_a_lease_given_back_with_a_hold_is_refused_until_the_hold_ends(
    receiver: Receiver,
) -> None:
    endpoint, _ = make_endpoint(receiver)
    token = lease_rows.owner_take(endpoint_id=endpoint.pk)
    assert token is not None
    lease_rows.owner_release(endpoint_id=endpoint.pk, token=token, hold_seconds=30)
    owner = EndpointOwner.objects.get(endpoint=endpoint)
    assert owner.token is None
    assert owner.expires_at is None
    assert owner.not_before is not None
    assert 25 < (owner.not_before - timezone.now()).total_seconds() <= 31
    assert lease_rows.owner_take(endpoint_id=endpoint.pk) is None

    # The hold over (as the database's clock says), the lease is free again.
    EndpointOwner.objects.filter(endpoint=endpoint).update(not_before=Now() - timedelta(seconds=1))
    again = lease_rows.owner_take(endpoint_id=endpoint.pk)
    assert again is not None
    # A release by a token that no longer holds the lease changes nothing.
    lease_rows.owner_release(endpoint_id=endpoint.pk, token=token, hold_seconds=30)
    assert EndpointOwner.objects.get(endpoint=endpoint).token == again
    lease_rows.owner_release(endpoint_id=endpoint.pk, token=again)
    assert EndpointOwner.objects.get(endpoint=endpoint).not_before is None


@pytest.mark.usefixtures("lease_sql")
def test_a_lease_that_ran_out_is_taken_over(receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver)
    first = lease_rows.owner_take(endpoint_id=endpoint.pk)
    assert first is not None
    owner = EndpointOwner.objects.get(endpoint=endpoint)
    assert owner.expires_at is not None
    assert owner.taken_at is not None
    lease = (owner.expires_at - owner.taken_at).total_seconds()
    assert lease == pytest.approx(lease_rows.lease_seconds())
    EndpointOwner.objects.filter(endpoint=endpoint).update(expires_at=Now() - timedelta(seconds=1))
    second = lease_rows.owner_take(endpoint_id=endpoint.pk)
    assert second is not None
    assert second != first
    assert lease_rows.owner_renew(endpoint_id=endpoint.pk, token=first) is False


@pytest.mark.usefixtures("lease_sql")
def test_an_endpoint_s_first_owner_makes_its_lease_row_and_a_gone_endpoint_has_none(
    receiver: Receiver,
) -> None:
    endpoint, _ = make_endpoint(receiver)
    EndpointOwner.objects.filter(endpoint=endpoint).delete()
    first = lease_rows.owner_take(endpoint_id=endpoint.pk)
    assert first is not None
    assert EndpointOwner.objects.get(endpoint=endpoint).token == first
    # The row exists now and is held: a second first-owner finds it so and takes nothing.
    assert lease_rows.owner_take(endpoint_id=endpoint.pk) is None
    assert EndpointOwner.objects.get(endpoint=endpoint).token == first
    # An endpoint that is gone gets no row and no owner (no error either).
    assert lease_rows.owner_take(endpoint_id=uuid.uuid4()) is None
    assert not EndpointOwner.objects.exclude(endpoint=endpoint).filter(token__isnull=False)


@pytest.mark.usefixtures("lease_sql")
def test_a_renewal_extends_the_lease_and_the_rows_its_owner_is_sending_only(
    receiver: Receiver,
) -> None:
    endpoint, _ = make_endpoint(receiver)
    other, _ = make_endpoint(receiver)
    token = lease_rows.owner_take(endpoint_id=endpoint.pk)
    other_token = lease_rows.owner_take(endpoint_id=other.pk)
    assert token is not None
    assert other_token is not None
    mine, theirs = delivery_row(endpoint), delivery_row(other)
    assert [d.pk for d in claims.claim_due(endpoint=endpoint, token=token, limit=5)] == [mine.pk]
    assert [d.pk for d in claims.claim_due(endpoint=other, token=other_token, limit=5)] == [
        theirs.pk
    ]
    soon = Now() + timedelta(seconds=1)
    EndpointOwner.objects.update(expires_at=soon)
    Delivery.objects.update(lease_expires_at=soon)

    assert lease_rows.owner_renew(endpoint_id=endpoint.pk, token=token) is True

    lease = lease_rows.lease_seconds()
    owner = EndpointOwner.objects.get(endpoint=endpoint)
    assert owner.expires_at is not None
    assert (owner.expires_at - timezone.now()).total_seconds() > lease - 5
    mine.refresh_from_db()
    assert mine.lease_expires_at is not None
    assert (mine.lease_expires_at - timezone.now()).total_seconds() > lease - 5
    # Another endpoint's lease and rows are not this owner's to extend.
    theirs.refresh_from_db()
    assert theirs.lease_expires_at is not None
    assert (theirs.lease_expires_at - timezone.now()).total_seconds() < 5
    other_owner = EndpointOwner.objects.get(endpoint=other)
    assert other_owner.expires_at is not None
    assert (other_owner.expires_at - timezone.now()).total_seconds() < 5
    # An owner whose lease was taken over renews nothing, the rows it claimed included.
    EndpointOwner.objects.filter(endpoint=endpoint).update(token=uuid.uuid4())
    Delivery.objects.filter(pk=mine.pk).update(lease_expires_at=soon)
    assert lease_rows.owner_renew(endpoint_id=endpoint.pk, token=token) is False
    mine.refresh_from_db()
    assert mine.lease_expires_at is not None
    assert (mine.lease_expires_at - timezone.now()).total_seconds() < 5


def test_leases_are_judged_by_the_database_clock_not_the_worker_s(receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver)
    token = lease_rows.owner_take(endpoint_id=endpoint.pk)
    assert token is not None
    event = Event.objects.create(type="order.created", data={}, occurred_at=timezone.now())
    delivery = Delivery.objects.create(event=event, endpoint=endpoint, next_attempt_at=Now())
    claimed = claims.claim_due(endpoint=endpoint, token=token, limit=5)
    assert [d.pk for d in claimed] == [delivery.pk]

    # A worker whose clock runs an hour fast must neither take the live lease nor the
    # row in flight under it.
    fast = timezone.now() + timedelta(hours=1)
    with mock.patch("django.utils.timezone.now", return_value=fast):
        assert lease_rows.owner_take(endpoint_id=endpoint.pk) is None
        other = lease_rows.owner_take(endpoint_id=endpoint.pk) or token
        assert claims.claim_due(endpoint=endpoint, token=other, limit=5, with_expired=True) == []


def test_a_round_claim_takes_rows_only_under_the_current_version(receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver)
    token = lease_rows.owner_take(endpoint_id=endpoint.pk)
    assert token is not None
    event = Event.objects.create(
        type="order.created", data={"nested": {"n": 1}}, occurred_at=timezone.now()
    )
    delivery = Delivery.objects.create(event=event, endpoint=endpoint, next_attempt_at=Now())
    version = claims.endpoint_version(endpoint_id=endpoint.pk)
    assert version is not None

    # A new secret (or any change of the endpoint's row) is a new version: nothing taken.
    services.endpoint_rotate_secret(endpoint=endpoint, grace_seconds=60)
    stale = claims.claim_round(endpoint=endpoint, version=version, token=token, limit=5)
    assert stale.rows == []
    assert stale.version != version
    assert stale.active
    assert stale.version is not None
    assert Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.PENDING

    current = claims.claim_round(endpoint=endpoint, version=stale.version, token=token, limit=5)
    [claimed] = current.rows
    fresh = Delivery.objects.select_related("event").get(pk=delivery.pk)
    # The instances are what the ORM would build (converters applied: JSON, datetimes).
    assert claimed.status == fresh.status == DeliveryStatus.SENDING
    assert claimed.attempts == fresh.attempts == 1
    assert claimed.lease_token == token
    assert claimed.event.data == fresh.event.data == {"nested": {"n": 1}}
    assert claimed.event.occurred_at == fresh.event.occurred_at
    assert claimed.endpoint is endpoint
    for model, made, loaded in ((Delivery, claimed, fresh), (Event, claimed.event, fresh.event)):
        for field in model._meta.concrete_fields:
            assert getattr(made, field.attname) == getattr(loaded, field.attname), field.name
        assert made._state.adding is False
        assert made._state.db == loaded._state.db
    # Saved like any loaded instance (an update, not an insert).
    claimed.last_error = "kept"
    claimed.save(update_fields=["last_error"])
    assert Delivery.objects.get(pk=delivery.pk).last_error == "kept"

    Endpoint.objects.filter(pk=endpoint.pk).update(state=EndpointState.DISABLED)
    later = Event.objects.create(type="order.created", data={}, occurred_at=timezone.now())
    other = Delivery.objects.create(event=later, endpoint=endpoint, next_attempt_at=Now())
    version = claims.endpoint_version(endpoint_id=endpoint.pk)
    assert version is not None
    disabled = claims.claim_round(endpoint=endpoint, version=version, token=token, limit=5)
    assert disabled.rows == []
    assert not disabled.active
    assert Delivery.objects.get(pk=other.pk).status == DeliveryStatus.PENDING


def test_a_round_claim_s_instances_are_made_as_the_orm_makes_them_for_init_listeners(
    receiver: Receiver,
) -> None:
    # Without listeners the claim makes its instances without Model.__init__; a host that
    # listens to post_init for these models still hears of every one.
    from django.db.models.signals import post_init

    endpoint, _ = make_endpoint(receiver)
    token = lease_rows.owner_take(endpoint_id=endpoint.pk)
    assert token is not None
    delivery_row(endpoint)
    version = claims.endpoint_version(endpoint_id=endpoint.pk)
    assert version is not None
    heard: list[object] = []

    def listener(sender: type, instance: object, **kwargs: object) -> None:
        heard.append(instance)

    post_init.connect(listener, sender=Delivery)
    try:
        [claimed] = claims.claim_round(
            endpoint=endpoint, version=version, token=token, limit=5
        ).rows
    finally:
        post_init.disconnect(listener, sender=Delivery)
    assert heard == [claimed]


class _RememberingDelivery(Delivery):
    """A host's kind of model: its own `from_db` remembers what was loaded."""

    loaded_status = ""

    class Meta:
        proxy = True
        app_label = "deliveries"

    @classmethod
    def from_db(
        cls, db: str | None, field_names: Collection[str], values: Collection[Any], **kw: Any
    ) -> Self:
        instance = super().from_db(db, field_names, values, **kw)
        instance.loaded_status = instance.status
        return instance


def test_a_model_with_its_own_from_db_is_made_by_it() -> None:
    values = [field.get_default() for field in Delivery._meta.concrete_fields]
    values[[f.attname for f in Delivery._meta.concrete_fields].index("status")] = "sending"
    assert claims._plain_fields(Delivery)
    assert not claims._plain_fields(_RememberingDelivery)
    made = claims._from_row(_RememberingDelivery, values, connection)
    assert made.loaded_status == "sending"


def test_next_due_in_sees_only_what_an_owner_could_claim(receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver, ordered_delivery=True)
    now = timezone.now()

    def row(*, due_in: float, status: str = DeliveryStatus.PENDING, **fields: Any) -> Delivery:
        event = Event.objects.create(type="order.created", data={}, occurred_at=now)
        return Delivery.objects.create(
            event=event,
            endpoint=endpoint,
            status=status,
            next_attempt_at=now + timedelta(seconds=due_in),
            **fields,
        )

    assert claims.next_due_in(endpoint_id=endpoint.pk) is None
    # Finished or held rows are nobody's to claim, however long past due.
    row(due_in=-100, status=DeliveryStatus.SUCCEEDED)
    row(due_in=-100, status=DeliveryStatus.HELD)
    assert claims.next_due_in(endpoint_id=endpoint.pk) is None
    row(due_in=60)
    assert 55 < (claims.next_due_in(endpoint_id=endpoint.pk) or 0) <= 60

    # Due now, but the second of its key while the first is out: not claimable, so the
    # answer is still the unordered row's (a count of rows due would say 0).
    row(due_in=-5, status=DeliveryStatus.SENDING, ordering_key="k", ordering_position=now)
    second = row(due_in=-1, ordering_key="k", ordering_position=now + timedelta(seconds=1))
    assert 55 < (claims.next_due_in(endpoint_id=endpoint.pk) or 0) <= 60

    Delivery.objects.filter(ordering_key="k").exclude(pk=second.pk).update(
        status=DeliveryStatus.SUCCEEDED
    )
    assert claims.next_due_in(endpoint_id=endpoint.pk) == 0.0
    Delivery.objects.filter(pk=second.pk).update(status=DeliveryStatus.SUCCEEDED)
    row(due_in=-1)
    assert claims.next_due_in(endpoint_id=endpoint.pk) == 0.0


def test_the_owner_s_own_health_writes_are_no_new_version(receiver: Receiver) -> None:
    # Recording writes the endpoint's health columns about once a second: were they part of
    # the version, every such round would send the owner back to read the endpoint again.
    endpoint, _ = make_endpoint(receiver)
    version = claims.endpoint_version(endpoint_id=endpoint.pk)
    Endpoint.objects.filter(pk=endpoint.pk).update(
        consecutive_failures=3,
        last_success_at=timezone.now(),
        last_failure_at=timezone.now(),
        failing_since=timezone.now(),
    )
    assert claims.endpoint_version(endpoint_id=endpoint.pk) == version
    # What a round sends with is versioned: the circuit, a header, the URL.
    Endpoint.objects.filter(pk=endpoint.pk).update(circuit_state=CircuitState.OPEN)
    opened = claims.endpoint_version(endpoint_id=endpoint.pk)
    assert opened != version
    Endpoint.objects.filter(pk=endpoint.pk).update(url=endpoint.url + "/other")
    assert claims.endpoint_version(endpoint_id=endpoint.pk) not in (version, opened)


def test_recording_keeps_the_owner_s_copy_of_the_endpoint_s_health(receiver: Receiver) -> None:
    from django.test.utils import CaptureQueriesContext

    from deliveries.pipeline.record import Result, _record_endpoints_health, _remember
    from webhooks_core.retry_policy import Decision, Verdict

    endpoint, _ = make_endpoint(receiver)
    event = Event.objects.create(type="order.created", data={}, occurred_at=timezone.now())
    delivery = Delivery.objects.create(event=event, endpoint=endpoint, next_attempt_at=Now())
    attempt = Attempt(delivery=delivery, number=1, started_at=timezone.now(), duration_ms=1)

    def sent(verdict: Verdict) -> list[Result]:
        return [Result(delivery, Decision(verdict), status_code=200, attempt=attempt)]

    def record_health(results: list[Result]) -> None:
        # As a batch does: the owner's copy follows what was written once it is.
        remembered: list[tuple[Endpoint, dict[str, Any]]] = []
        _record_endpoints_health([(endpoint, results)], remembered)
        for copy, written in remembered:
            _remember(copy, written)

    record_health(sent(Verdict.RETRY))
    stored = Endpoint.objects.get(pk=endpoint.pk)
    assert stored.consecutive_failures == endpoint.consecutive_failures == 1
    assert stored.failing_since == endpoint.failing_since is not None
    record_health(sent(Verdict.SUCCEEDED))
    stored = Endpoint.objects.get(pk=endpoint.pk)
    assert stored.last_success_at == endpoint.last_success_at is not None
    assert endpoint.consecutive_failures == stored.consecutive_failures == 0
    assert endpoint.failing_since is None
    # The next success within the precision writes nothing: the copy says it was just now.
    with CaptureQueriesContext(connection) as queries:
        record_health(sent(Verdict.SUCCEEDED))
    assert not [q for q in queries if q["sql"].startswith("UPDATE")]


def test_duplicate_wakes_are_folded_into_one_message(receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver)
    before = published_wakes()
    for _ in range(10):
        services.wake_endpoints([endpoint.pk])
    assert published_wakes() - before == 1


def test_an_ordered_endpoint_kept_busy_sends_in_order_with_few_messages(
    celery_worker: object, receiver: Receiver
) -> None:
    # Refused ordered messages must not dispatch themselves again with countdowns: when
    # they did, heads and non-heads alike, 60 deliveries took 1,807 task messages.
    endpoint, _ = make_endpoint(receiver, ordered_delivery=True, max_in_flight=1)
    receiver.default = Reply(delay_seconds=0.02)
    before = published_wakes()
    events = []
    for n in range(30):
        with transaction.atomic():
            events.append(services.emit("order.created", {"n": n}, ordering_key=f"k{n % 6}"))

    wait_until(
        lambda: (
            statuses(endpoint) == {DeliveryStatus.SUCCEEDED}
            and Delivery.objects.filter(endpoint=endpoint).count() == 30
        ),
        timeout=60,
        what="all 30 delivered",
    )
    sent = [json.loads(r.body)["data"]["n"] for r in receiver.requests]
    for key in range(6):
        line = [n for n in sent if n % 6 == key]
        assert line == sorted(line), f"key k{key} out of order: {line}"
    wakes = published_wakes() - before
    assert wakes <= 1.5 * 30, f"{wakes} wake messages for 30 deliveries"


def test_many_endpoints_share_the_process_cap_on_open_requests(
    celery_worker: object, receiver: Receiver, settings: SettingsWrapper
) -> None:
    settings.WEBHOOKS_DELIVERY_MAX_OPEN_REQUESTS = 2
    lock = threading.Lock()
    open_now = [0]
    most = [0]

    def handler(request: Any) -> Reply:
        with lock:
            open_now[0] += 1
            most[0] = max(most[0], open_now[0])
        time.sleep(0.15)
        with lock:
            open_now[0] -= 1
        return Reply()

    receiver.handler = handler
    endpoints = [make_endpoint(receiver, max_in_flight=4)[0] for _ in range(3)]
    with transaction.atomic():
        for n in range(12):
            services.emit("order.created", {"n": n})

    wait_until(
        lambda: (
            all(statuses(e) == {DeliveryStatus.SUCCEEDED} for e in endpoints)
            and Delivery.objects.count() == 36
        ),
        timeout=60,
        what="all delivered",
    )
    assert most[0] <= 2


@pytest.mark.parametrize(
    ("pool", "task_waits", "hands_on"),
    [("gevent", False, False), ("gevent", True, True), ("prefork", False, True)],
)
def test_an_owner_hands_its_endpoint_on_only_when_a_task_waits_for_the_pool(
    receiver: Receiver,
    settings: SettingsWrapper,
    pool: str,
    task_waits: bool,
    hands_on: bool,
) -> None:
    # Each hand-on costs a new turn's set-up (take, read, mark, release): a turn ends only
    # when another task message waits for this worker's pool, or when the worker cannot
    # tell (a prefork child).
    from celery.worker import state as worker_state

    from deliveries.pipeline.owner import lanes

    settings.WEBHOOKS_DELIVERY_TURN_SECONDS = 0.2
    receiver.default = Reply(delay_seconds=0.05)
    endpoint, _ = make_endpoint(receiver, max_in_flight=1)
    with transaction.atomic():
        for n in range(12):
            services.emit("order.created", {"n": n})
    waiting = mock.Mock(name="a task message waiting for a slot")
    before = published_wakes()
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(lanes, "_pool_name", pool))
        if task_waits:
            worker_state.reserved_requests.add(waiting)
            stack.callback(worker_state.reserved_requests.discard, waiting)
        result = services.endpoint_work(endpoint_id=endpoint.pk)
    if hands_on:
        assert result.sent < 12
        assert published_wakes() - before == 1
    else:
        assert result.sent == 12
        assert statuses(endpoint) == {DeliveryStatus.SUCCEEDED}
        assert published_wakes() == before


def test_deliveries_go_on_when_the_shared_counters_are_unreachable(
    celery_worker: object, receiver: Receiver, settings: SettingsWrapper
) -> None:
    # Nothing in Redis may stall an endpoint (there is no slot to leak).
    settings.WEBHOOKS_HEALTH_REDIS_URL = "redis://127.0.0.1:9/0"
    endpoint, _ = make_endpoint(receiver)
    for n in range(5):
        services.emit("order.created", {"n": n})
    wait_until(
        lambda: Delivery.objects.filter(endpoint=endpoint, status="succeeded").count() == 5,
        timeout=30,
        what="all delivered despite Redis",
    )


# --- the endpoint as it is now ----------------------------------------------------------


def test_a_disable_cancels_every_waiting_row_in_flight_ones_included(
    celery_worker: object, receiver: Receiver
) -> None:
    # Rows in flight at the disable once came back pending, were parked held, and stayed
    # so for ever.
    endpoint, _ = make_endpoint(receiver, max_in_flight=2)
    receiver.default = Reply(status=500, delay_seconds=0.5)
    with transaction.atomic():
        for n in range(6):
            services.emit("order.created", {"n": n})
    wait_until(lambda: len(receiver.requests) >= 2, what="requests in flight")

    services.endpoint_set_state(endpoint_id=endpoint.pk, state=EndpointState.DISABLED)

    wait_until(
        lambda: statuses(endpoint) == {DeliveryStatus.CANCELLED},
        timeout=30,
        what="every row cancelled",
    )


def test_a_suspend_holds_every_waiting_row_and_a_resume_sends_them(
    celery_worker: object, receiver: Receiver
) -> None:
    endpoint, _ = make_endpoint(receiver, max_in_flight=2)
    receiver.default = Reply(status=500, delay_seconds=0.3)
    with transaction.atomic():
        for n in range(6):
            services.emit("order.created", {"n": n})
    wait_until(lambda: len(receiver.requests) >= 2, what="requests in flight")

    services.endpoint_suspend(endpoint_id=endpoint.pk, reason="maintenance")
    wait_until(
        lambda: statuses(endpoint) == {DeliveryStatus.HELD}, timeout=30, what="every row held"
    )
    receiver.default = Reply()
    services.endpoint_resume(endpoint_id=endpoint.pk)
    wait_until(
        lambda: statuses(endpoint) == {DeliveryStatus.SUCCEEDED},
        timeout=30,
        what="every row delivered after the resume",
    )


def _suspended_with_a_held_row(receiver: Receiver) -> Endpoint:
    endpoint, _ = make_endpoint(receiver)
    services.endpoint_suspend(endpoint_id=endpoint.pk, reason="maintenance")
    delivery_row(endpoint, status=DeliveryStatus.HELD)
    return endpoint


def test_a_resume_racing_the_settling_of_a_suspension_strands_nothing(
    receiver: Receiver,
) -> None:
    # The settling once read the state, then held the rows in a second statement: a
    # resume committed in between found nothing held, and the rows then held on an
    # active endpoint stayed held for ever.
    endpoint = _suspended_with_a_held_row(receiver)
    delivery_row(endpoint)
    resumed = in_its_own_connection(lambda: services.endpoint_resume(endpoint_id=endpoint.pk))
    started = False

    def resume_after_the_state_read(execute: Any, sql: str, *args: Any) -> Any:
        nonlocal started
        result = execute(sql, *args)
        if not started and sql.lstrip().upper().startswith("SELECT"):
            started = True
            resumed.start()
            # Until the resume has committed, or waits for a lock we hold.
            wait_until(
                lambda: not resumed.is_alive() or _backends_waiting_for_a_lock() > 0,
                what="the resume committed or waiting",
            )
        return result

    with connection.execute_wrapper(resume_after_the_state_read):
        owner_settling.settle_inactive(str(endpoint.pk))
    resumed.join(timeout=20)
    assert not resumed.is_alive()
    endpoint.refresh_from_db()
    assert endpoint.state == EndpointState.ACTIVE
    assert statuses(endpoint) == {DeliveryStatus.PENDING}


def _backends_waiting_for_a_lock() -> int:
    with connection.cursor() as cursor:
        raw = cursor.cursor  # not through the test's execute wrapper again
        # Inside a transaction the activity view is a snapshot, taken once: take it anew.
        raw.execute("SELECT pg_stat_clear_snapshot()")
        raw.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database() AND pid <> pg_backend_pid() "
            "AND query ILIKE 'UPDATE%%deliveries_endpoint%%'"
        )
        return int(raw.fetchone()[0])


def test_rows_held_on_an_active_endpoint_are_released_by_the_sweeper(
    receiver: Receiver,
) -> None:
    endpoint, _ = make_endpoint(receiver)
    delivery_row(endpoint, status=DeliveryStatus.HELD, next_attempt_at=None)
    woken = published_wakes()

    result = services.sweep()

    assert result.held_released == 1
    assert statuses(endpoint) == {DeliveryStatus.PENDING}
    assert published_wakes() == woken + 1
    assert not Delivery.objects.filter(endpoint=endpoint, next_attempt_at__gt=Now()).exists()


def test_an_owner_that_settled_a_suspension_looks_once_more_and_sends_after_a_resume(
    receiver: Receiver,
) -> None:
    # An owner that found its endpoint suspended once stopped without looking again: a
    # resume committed just after its settling had its wake folded into the owner's work
    # (the owner was marked working), and the released rows waited for the sweeper.
    endpoint = _suspended_with_a_held_row(receiver)
    settle = owner_settling.settle_inactive
    woken = published_wakes()

    def settle_then_resume(endpoint_id: str) -> None:
        settle(endpoint_id)
        if Endpoint.objects.get(pk=endpoint_id).state != EndpointState.ACTIVE:
            services.endpoint_resume(endpoint_id=endpoint.pk)

    with mock.patch.object(owner_work, "settle_inactive", side_effect=settle_then_resume):
        result = services.endpoint_work(endpoint_id=endpoint.pk)

    assert published_wakes() == woken  # the resume's wake was folded into the owner's
    assert result.sent == 1
    assert len(receiver.requests) == 1
    assert statuses(endpoint) == {DeliveryStatus.SUCCEEDED}


def test_an_owner_renews_its_lease_every_third_of_it_while_a_request_is_open(
    receiver: Receiver, settings: SettingsWrapper
) -> None:
    settings.WEBHOOKS_LEASE_SECONDS = 3
    endpoint, _ = make_endpoint(receiver, read_timeout_seconds=10)
    receiver.default = Reply(delay_seconds=4)
    delivery = delivery_row(endpoint)
    worker = owner_at_work(endpoint)
    leases: list[tuple[Any, Any, Any]] = []
    while worker.is_alive():
        row = EndpointOwner.objects.filter(endpoint=endpoint).values_list("token", "expires_at")
        lease = row.first()  # none before the endpoint's first owner made it
        if lease is not None and len(receiver.requests) == 1:
            leases.append((*lease, timezone.now()))
        time.sleep(0.05)
    worker.join()

    held = [(token, expires, now) for token, expires, now in leases if token is not None]
    assert len({token for token, _, _ in held}) == 1  # one owner throughout
    assert all(expires > now for _, expires, now in held)  # never ran out
    assert len({expires for _, expires, _ in held}) >= 3  # renewed about every second
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SUCCEEDED


def test_an_owner_that_lost_its_lease_cuts_its_open_request_and_stops(
    receiver: Receiver, settings: SettingsWrapper
) -> None:
    settings.WEBHOOKS_LEASE_SECONDS = 1.5
    endpoint, _ = make_endpoint(receiver, read_timeout_seconds=30)
    receiver.default = Reply(delay_seconds=20)
    delivery_row(endpoint)
    worker = owner_at_work(endpoint)
    wait_until(lambda: len(receiver.requests) == 1, what="the request open")
    started = time.monotonic()

    # Another worker took the lease over (as after a pause longer than the lease).
    EndpointOwner.objects.filter(endpoint=endpoint).update(token=uuid.uuid4())
    worker.join(timeout=10)

    assert not worker.is_alive()
    # Cut at its next renewal (a third of the lease), not left open for the answer.
    assert time.monotonic() - started < 5


class _DeferringDestination:
    """A destination kind that cannot send now, for reasons of its own (a plug-in's)."""

    def send(self, delivery: Delivery, deadline: Any, credentials: Credentials) -> Outcome:
        return Outcome(Kind.DEFER, retry_after="30", error="broker busy")


def test_a_delivery_a_destination_defers_is_due_again_later_without_spending_an_attempt(
    receiver: Receiver,
) -> None:
    endpoint, _ = make_endpoint(receiver)
    delivery = delivery_row(endpoint)

    with mock.patch.object(
        owner_requests.destinations, "for_url", return_value=_DeferringDestination()
    ):
        services.endpoint_work(endpoint_id=endpoint.pk)

    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.attempts == 0
    assert not Attempt.objects.filter(delivery=delivery).exists()
    assert delivery.next_attempt_at is not None
    assert 25 < (delivery.next_attempt_at - timezone.now()).total_seconds() <= 31


def test_a_disable_cuts_a_long_open_request_short_and_cancels_its_row_within_seconds(
    receiver: Receiver,
) -> None:
    # An owner whose lanes were all busy learnt of a disable only when its requests ended:
    # with a long read timeout, its rows stayed sending for as long.
    endpoint, _ = make_endpoint(receiver, max_in_flight=1, read_timeout_seconds=60)
    receiver.default = Reply(delay_seconds=30)
    delivery_row(endpoint)
    delivery_row(endpoint)
    worker = owner_at_work(endpoint)
    wait_until(lambda: len(receiver.requests) == 1, what="the request open")

    services.endpoint_set_state(endpoint_id=endpoint.pk, state=EndpointState.DISABLED)

    wait_until(
        lambda: statuses(endpoint) == {DeliveryStatus.CANCELLED},
        timeout=15,
        what="every row cancelled, the open one included",
    )
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert len(receiver.requests) == 1
    # Cut short by our own stop: no attempt spent, nothing learnt of the receiver.
    assert sum(Delivery.objects.filter(endpoint=endpoint).values_list("attempts", flat=True)) == 0
    endpoint.refresh_from_db()
    assert endpoint.consecutive_failures == 0
    assert EndpointOwner.objects.get(endpoint=endpoint).not_before is None


def test_an_owner_s_state_check_reads_the_state_or_none_when_the_endpoint_is_gone(
    receiver: Receiver,
) -> None:
    endpoint, _ = make_endpoint(receiver)
    assert claims.endpoint_state(endpoint_id=endpoint.pk) == EndpointState.ACTIVE
    services.endpoint_set_state(endpoint_id=endpoint.pk, state=EndpointState.DISABLED)
    assert claims.endpoint_state(endpoint_id=str(endpoint.pk)) == EndpointState.DISABLED
    assert claims.endpoint_state(endpoint_id=uuid.uuid4()) is None


@pytest.mark.parametrize(
    ("retry_after", "seconds"),
    [(None, 1.0), ("0", 1.0), ("-5", 1.0), ("nan", 1.0), ("inf", 1.0), ("7.5", 7.5), ("1e9", 30)],
)
def test_a_deferral_waits_at_least_the_defer_seconds_and_at_most_a_countdown(
    settings: SettingsWrapper, retry_after: str | None, seconds: float
) -> None:
    # A destination saying 0 had its owner claim and defer in a tight loop; "nan" or
    # "inf" failed the recording.
    settings.WEBHOOKS_DEFER_SECONDS = 1.0
    settings.WEBHOOKS_MAX_COUNTDOWN_SECONDS = 30
    outcome = Outcome(Kind.DEFER, retry_after=retry_after)
    assert owner_results.defer_seconds(outcome) == seconds


def test_of_requests_cut_by_a_stop_only_those_not_acknowledged_are_deferred(
    receiver: Receiver,
) -> None:
    # A broker's acknowledgement carries no status code: a publish that succeeded just
    # before the stop was once taken for a cut one (and cancelled or sent again).
    endpoint, _ = make_endpoint(receiver)
    acknowledged, cut = delivery_row(endpoint), delivery_row(endpoint)
    for row in (acknowledged, cut):
        row.endpoint = endpoint
    requests = owner_requests.OpenRequests()
    requests.cut = {acknowledged.pk, cut.pk}
    credentials = Credentials(["secret"], [], 0)
    now = timezone.now()

    results, deferral = requests.settled(
        [
            (acknowledged, Outcome(Kind.SUCCEEDED, started_at=now), credentials),
            (cut, Outcome(Kind.RETRY, error="TimeoutError", started_at=now), credentials),
        ]
    )

    assert [r.delivery.pk for r in results] == [acknowledged.pk]
    assert [d.pk for d in deferral.deliveries] == [cut.pk]


def test_a_header_change_applies_to_the_owner_s_next_round(
    celery_worker: object, receiver: Receiver
) -> None:
    # Take-along rounds once used the endpoint as read at the batch's start.
    endpoint, _ = make_endpoint(receiver, max_in_flight=1, custom_headers={"X-Version": "old"})
    changed = threading.Event()

    def handler(request: Any) -> Reply:
        if not changed.is_set():
            fresh = Endpoint.objects.get(pk=endpoint.pk)
            services.endpoint_update(endpoint=fresh, custom_headers={"X-Version": "new"})
            changed.set()
            connection.close()  # the receiver's thread
        return Reply(delay_seconds=0.05)

    receiver.handler = handler
    with transaction.atomic():
        for n in range(4):
            services.emit("order.created", {"n": n})
    receiver.wait_for(4)
    assert [r.headers.get("X-Version") for r in receiver.requests][1:] == ["new"] * 3


def test_a_secret_rotated_or_expired_while_the_owner_works_applies_to_its_next_round(
    celery_worker: object, receiver: Receiver
) -> None:
    # The owner keeps the endpoint's secrets between rounds; each claim checks that they
    # (and the endpoint) are still as read, so a rotation is never missed for a round.
    endpoint, _ = make_endpoint(receiver, max_in_flight=1)
    step = {"n": 0}

    def handler(request: Any) -> Reply:
        step["n"] += 1
        if step["n"] == 1:
            services.endpoint_rotate_secret(
                endpoint=Endpoint.objects.get(pk=endpoint.pk), grace_seconds=3600
            )
        elif step["n"] == 3:
            # The old secret's grace ends early, written past the services.
            endpoint.secrets.exclude(expires_at__isnull=True).update(
                expires_at=timezone.now() - timedelta(seconds=1)
            )
        connection.close()  # the receiver's thread
        return Reply(delay_seconds=0.05)

    receiver.handler = handler
    with transaction.atomic():
        for n in range(5):
            services.emit("order.created", {"n": n})
    receiver.wait_for(5)
    counts = [r.headers["X-Webhook-Signature"].count("v1=") for r in receiver.requests]
    assert counts == [1, 2, 2, 1, 1]


def test_the_next_turn_starts_from_the_last_read_and_its_claim_sees_any_change(
    receiver: Receiver,
) -> None:
    # Events one at a time make one owner's turn each: the next turn starts from the
    # endpoint as the last one read it (no reads before its claim), and the claim's
    # version check still catches a change made between the turns.
    from django.test.utils import CaptureQueriesContext

    endpoint, _ = make_endpoint(receiver)

    def one_event(before_the_turn: Any = None) -> list[str]:
        with transaction.atomic():
            services.emit("order.created", {})
        services.events_fan_out(event_ids=list(Event.objects.values_list("pk", flat=True)))
        if before_the_turn:
            before_the_turn()
        with CaptureQueriesContext(connection) as queries:
            services.endpoint_work(endpoint_id=endpoint.pk)
        return [q["sql"] for q in queries]

    one_event()
    second = one_event()
    endpoint_reads = [sql for sql in second if f'FROM "{Endpoint._meta.db_table}"' in sql]
    assert endpoint_reads == []
    assert len(receiver.requests) == 2

    one_event(lambda: services.endpoint_rotate_secret(endpoint=endpoint, grace_seconds=3600))
    assert receiver.requests[-1].headers["X-Webhook-Signature"].count("v1=") == 2
    disable = Endpoint.objects.filter(pk=endpoint.pk).update
    one_event(lambda: disable(state=EndpointState.DISABLED))
    assert len(receiver.requests) == 3
    assert statuses(endpoint) == {DeliveryStatus.SUCCEEDED, DeliveryStatus.CANCELLED}


# --- the breaker and ordering lines -----------------------------------------------------


def test_a_probe_that_failed_on_our_side_opens_the_circuit_again(receiver: Receiver) -> None:
    # A probe with no request sent once closed a half-open breaker.
    endpoint, _ = make_endpoint(receiver)
    Endpoint.objects.filter(pk=endpoint.pk).update(
        circuit_state=CircuitState.HALF_OPEN, circuit_changed_at=timezone.now()
    )
    endpoint.refresh_from_db()
    event = Event.objects.create(type="order.created", data={}, occurred_at=timezone.now())
    delivery = Delivery.objects.create(event=event, endpoint=endpoint, next_attempt_at=Now())
    token = lease_rows.owner_take(endpoint_id=endpoint.pk)
    assert token is not None
    [claimed] = claims.claim_due(endpoint=endpoint, token=token, limit=1)
    failed = Outcome(Kind.RETRY, error="not sent, error on our side", local_failure=True)
    result = _result(claimed, failed, Credentials(["s"], [], 0))

    from deliveries.pipeline.record import Deferral, DeliveryClaim, record

    claim = DeliveryClaim([claimed], token, timezone.now(), timezone.now() + timedelta(days=1))
    record(claim, endpoint, [result], Deferral([]))

    endpoint.refresh_from_db()
    assert endpoint.circuit_state == CircuitState.OPEN
    assert Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.PENDING


def test_after_a_successful_probe_the_owner_sends_the_rest_at_once(
    receiver: Receiver, settings: SettingsWrapper
) -> None:
    # A probe's success closes the circuit only once recorded: a next round started before
    # it (as rounds of successes may be) would find the circuit half-open and hold the
    # endpoint for a whole request's time (here 15 s) with rows due. (No ramp after the
    # close: its share of traffic is drawn at random.)
    settings.WEBHOOKS_BREAKER_RAMP_SECONDS = 0
    endpoint, _ = make_endpoint(receiver, connect_timeout_seconds=5, read_timeout_seconds=10)
    Endpoint.objects.filter(pk=endpoint.pk).update(
        circuit_state=CircuitState.OPEN, circuit_changed_at=timezone.now() - timedelta(hours=1)
    )
    with transaction.atomic():
        for n in range(6):
            services.emit("order.created", {"n": n})
    services.events_fan_out(event_ids=list(Event.objects.values_list("pk", flat=True)))

    services.endpoint_work(endpoint_id=endpoint.pk)

    assert statuses(endpoint) == {DeliveryStatus.SUCCEEDED}
    assert Endpoint.objects.get(pk=endpoint.pk).circuit_state == CircuitState.CLOSED
    assert len(receiver.requests) == 6


def test_a_retried_cancelled_head_waits_for_its_successor_in_flight(receiver: Receiver) -> None:
    # A retried cancelled head could once be sent beside a successor in flight.
    endpoint, _ = make_endpoint(receiver, ordered_delivery=True)
    now = timezone.now()
    rows = []
    for n in range(3):
        event = Event.objects.create(
            type="order.created", data={}, occurred_at=now, ordering_key="k", fanned_out_at=now
        )
        rows.append(
            Delivery.objects.create(
                event=event,
                endpoint=endpoint,
                next_attempt_at=now,
                ordering_key="k",
                ordering_position=now + timedelta(seconds=n),
            )
        )
    head, second, _third = rows
    services.delivery_cancel(delivery_id=head.pk)
    token = lease_rows.owner_take(endpoint_id=endpoint.pk)
    assert token is not None
    assert [d.pk for d in claims.claim_due(endpoint=endpoint, token=token, limit=5)] == [second.pk]
    services.delivery_retry(delivery_id=head.pk)

    assert claims.claim_due(endpoint=endpoint, token=token, limit=5) == []


# --- the sweeper ------------------------------------------------------------------------


def test_the_sweeper_wakes_an_idle_endpoint_beside_a_saturated_one_in_a_few_queries(
    receiver: Receiver, django_assert_max_num_queries: Any, redis_client: Any
) -> None:
    # One saturated endpoint's backlog once filled every sweep (oldest rows first) and
    # another endpoint's truly lost rows waited behind it.
    redis_client.flushdb()
    saturated, _ = make_endpoint(receiver)
    lost, _ = make_endpoint(receiver)
    long_ago = timezone.now() - timedelta(minutes=10)
    event = Event.objects.create(
        type="order.created", data={}, occurred_at=long_ago, fanned_out_at=long_ago
    )
    Delivery.objects.bulk_create(
        [
            Delivery(
                event=Event.objects.create(
                    type="order.created", data={}, occurred_at=long_ago, fanned_out_at=long_ago
                ),
                endpoint=saturated,
                next_attempt_at=long_ago,
            )
            for _ in range(300)
        ]
    )
    Delivery.objects.create(event=event, endpoint=lost, next_attempt_at=timezone.now())
    # The saturated endpoint's owner is alive and working.
    assert lease_rows.owner_take(endpoint_id=saturated.pk) is not None

    with django_assert_max_num_queries(6):
        result = services.sweep()

    assert result.deliveries_due == 1
    assert redis_client.llen("webhooks.delivery") == 1
    body = redis_client.lindex("webhooks.delivery", 0).decode()
    assert str(lost.pk) in body


def test_an_owner_that_died_costs_one_lease(
    celery_worker: object, receiver: Receiver, settings: SettingsWrapper
) -> None:
    settings.WEBHOOKS_LEASE_SECONDS = 1.0
    endpoint, _ = make_endpoint(receiver)
    event = Event.objects.create(
        type="order.created", data={}, occurred_at=timezone.now(), fanned_out_at=timezone.now()
    )
    delivery = Delivery.objects.create(event=event, endpoint=endpoint, next_attempt_at=Now())
    # A worker took the endpoint and its row, then died (no release, no record).
    dead = lease_rows.owner_take(endpoint_id=endpoint.pk)
    assert dead is not None
    assert claims.claim_due(endpoint=endpoint, token=dead, limit=1)

    wait_until(
        lambda: EndpointOwner.objects.filter(pk=endpoint.pk, expires_at__lt=Now()).exists(),
        timeout=5,
        what="the dead owner's lease to run out",
    )
    services.sweep()
    wait_until(
        lambda: Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.SUCCEEDED,
        timeout=10,
        what="the next owner to send it",
    )
    assert len(receiver.requests) == 1


def test_the_fast_unordered_claim_takes_what_the_orm_rule_calls_due(receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver)
    other, _ = make_endpoint(receiver)
    now = timezone.now()
    rows = {}
    cases: dict[str, dict[str, Any]] = {
        "due": {"next_attempt_at": now - timedelta(seconds=5)},
        "due_later_in_line": {"next_attempt_at": now - timedelta(seconds=1)},
        "not_yet": {"next_attempt_at": now + timedelta(minutes=5)},
        "held": {"status": DeliveryStatus.HELD, "next_attempt_at": now},
        "done": {"status": DeliveryStatus.SUCCEEDED, "next_attempt_at": None},
        "keyed": {"next_attempt_at": now, "ordering_key": "k", "ordering_position": now},
    }
    for name, fields in cases.items():
        event = Event.objects.create(type="order.created", data={}, occurred_at=now)
        rows[name] = Delivery.objects.create(event=event, endpoint=endpoint, **fields)
    elsewhere = Event.objects.create(type="order.created", data={}, occurred_at=now)
    Delivery.objects.create(event=elsewhere, endpoint=other, next_attempt_at=now)
    token = lease_rows.owner_take(endpoint_id=endpoint.pk)
    assert token is not None

    first = claims.claim_due(endpoint=endpoint, token=token, limit=1)
    rest = claims.claim_due(endpoint=endpoint, token=token, limit=10)

    assert [d.pk for d in first] == [rows["due"].pk], "oldest due first, within the limit"
    # A keyed row left from when the endpoint asked for order is taken by every claim
    # (the ordered rule, after the plain rows), not only by an owner's first: otherwise
    # the look that counts it as due and the claim disagreed, and its owner spun.
    assert [d.pk for d in rest] == [rows["due_later_in_line"].pk, rows["keyed"].pk]
    taken = Delivery.objects.get(pk=rows["due"].pk)
    assert taken.status == DeliveryStatus.SENDING
    assert taken.lease_token == token
    assert taken.attempts == 1
    assert taken.lease_expires_at is not None
    assert taken.lease_expires_at > timezone.now() + timedelta(seconds=20)
    assert claims.claim_due(endpoint=endpoint, token=token, limit=10, with_expired=True) == []


def test_a_time_limit_never_leaves_a_request_running_unrecorded(receiver: Receiver) -> None:
    # The task's time limit once killed the task only; its lanes kept their sockets,
    # nothing was recorded, and the sweeper sent again while the first request was open.
    from celery.exceptions import SoftTimeLimitExceeded

    with trickling_server() as (url, accepted):
        endpoint, _ = services.endpoint_create(
            url=url, event_types=["*"], connect_timeout_seconds=5, read_timeout_seconds=30
        )
        event = Event.objects.create(
            type="order.created", data={}, occurred_at=timezone.now(), fanned_out_at=Now()
        )
        delivery = Delivery.objects.create(event=event, endpoint=endpoint, next_attempt_at=Now())

        def time_is_up(self: Any, may_claim: bool) -> None:
            wait_until(lambda: accepted, what="the request to be open")
            raise SoftTimeLimitExceeded()

        started = time.monotonic()
        with (
            mock.patch.object(owner_work.Owner, "_wait_and_record", time_is_up),
            pytest.raises(SoftTimeLimitExceeded),
        ):
            services.endpoint_work(endpoint_id=endpoint.pk)
        took = time.monotonic() - started

    assert took < 5, "the open request was cut short, not waited for"
    attempt = Attempt.objects.get(delivery=delivery)
    assert attempt.response_status is None
    row = Delivery.objects.get(pk=delivery.pk)
    assert row.status == DeliveryStatus.PENDING
    assert row.lease_token is None
    assert not EndpointOwner.objects.filter(pk=endpoint.pk, token__isnull=False).exists()


def _record_round_off_the_owner(
    monkeypatch: pytest.MonkeyPatch, error: Exception | None = None
) -> list[str]:
    """Connections taken as pooled, so an owner writes a round that all succeeded in a
    thread of its own; returns the names of the threads that wrote rounds (the write off
    the owner's thread fails with `error`, if given)."""
    monkeypatch.setattr(owner_writing, "connections_pooled", lambda: True)
    writers: list[str] = []
    real = owner_writing.record_round
    owner_thread = threading.current_thread()

    def record_round(r: Any) -> dict[int, str]:
        writers.append(threading.current_thread().name)
        if error is not None and threading.current_thread() is not owner_thread:
            raise error
        return real(r)

    monkeypatch.setattr(owner_writing, "record_round", record_round)
    return writers


def test_a_round_written_while_its_owner_goes_on_is_still_its_own(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    writers = _record_round_off_the_owner(monkeypatch)
    endpoint, _ = make_endpoint(receiver, max_in_flight=1)
    rows = [delivery_row(endpoint) for _ in range(4)]

    result = services.endpoint_work(endpoint_id=endpoint.pk)

    # The owner waited for every write before its turn ended: each row's outcome is its.
    assert result.outcomes == {row.pk: services.DeliveryOutcome.SUCCEEDED for row in rows}
    assert statuses(endpoint) == {DeliveryStatus.SUCCEEDED}
    assert len(receiver.requests) == 4
    assert set(writers) - {threading.current_thread().name}, "no round was written meanwhile"


def test_an_owner_goes_on_sending_while_its_last_round_is_still_being_written(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An owner once waited for its last round's write before it recorded the next, so
    # one endpoint's rounds went no faster than its recordings (a fast receiver: 470
    # deliveries/s, two per round). Now the rounds that end meanwhile are written
    # together next: with the first round's write held, every request still goes out.
    monkeypatch.setattr(owner_writing, "connections_pooled", lambda: True)
    writing, release = threading.Event(), threading.Event()
    real = owner_writing.record_round

    def held_record_round(r: Any) -> dict[int, str]:
        writing.set()
        assert release.wait(60), "the test never let the write go on"
        return real(r)

    monkeypatch.setattr(owner_writing, "record_round", held_record_round)
    endpoint, _ = make_endpoint(receiver, max_in_flight=1)
    rows = [delivery_row(endpoint) for _ in range(6)]
    worker = owner_at_work(endpoint)
    try:
        receiver.wait_for(6, timeout=20)
        assert writing.is_set()
    finally:
        release.set()
        worker.join(60)
    assert not worker.is_alive()
    assert statuses(endpoint) == {DeliveryStatus.SUCCEEDED}
    assert Attempt.objects.filter(delivery__in=rows).count() == 6


def test_a_failed_write_made_while_its_owner_went_on_is_the_owners_error(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    _record_round_off_the_owner(monkeypatch, error=DatabaseError("refused"))
    endpoint, _ = make_endpoint(receiver, max_in_flight=1)
    rows = [delivery_row(endpoint) for _ in range(3)]

    with pytest.raises(DatabaseError, match="refused"):
        services.endpoint_work(endpoint_id=endpoint.pk)

    # As any error of the owner's: the lease is given back; the first round, whose write
    # failed, stays claimed (sent again once its lease ends); the round the owner had in
    # hand when it learnt of the failure is written, not dropped; the one then open is
    # cut short by the abort or answered first, and written either way.
    assert EndpointOwner.objects.get(endpoint=endpoint).token is None
    by_row = dict(Delivery.objects.filter(endpoint=endpoint).values_list("pk", "status"))
    assert by_row[rows[0].pk] == DeliveryStatus.SENDING
    assert by_row[rows[1].pk] == DeliveryStatus.SUCCEEDED
    assert by_row[rows[2].pk] in {DeliveryStatus.SUCCEEDED, DeliveryStatus.PENDING}


def test_a_round_does_not_wait_for_requests_of_a_later_claim(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Events one at a time reach an owner while its lanes are out, so its requests start
    # from different claims and end at different times. A round once waited (up to its
    # gather window) for every open request, leaving the lanes that had ended idle for
    # the whole window, round after round: 279-285 deliveries/s where 20 endpoints'
    # lanes allowed 400. The window is made long here, so waiting for a later claim's
    # request shows as the first lane idle until the second request ends (8 s).
    monkeypatch.setattr(owner_requests, "MAX_GATHER_SECONDS", 60.0)
    monkeypatch.setattr(owner_requests, "GATHER_SHARE", 1000.0)
    endpoint, _ = make_endpoint(receiver, max_in_flight=2, read_timeout_seconds=30)
    delays: dict[str, float] = {}
    receiver.handler = lambda request: Reply(
        delay_seconds=delays.pop(request.headers["X-Webhook-Id"], 0.0)
    )
    first = delivery_row(endpoint)
    delays[str(first.event_id)] = 1.0
    worker = owner_at_work(endpoint)
    try:
        receiver.wait_for(1)
        second = delivery_row(endpoint)  # claimed by the owner's next look, apart
        delays[str(second.event_id)] = 8.0
        receiver.wait_for(2)
        third = delivery_row(endpoint)
        # The first request's lane, free after its second, takes the third at once:
        # long before the second request's answer.
        *_, sent_second, sent_third = receiver.wait_for(3, timeout=20)
    finally:
        worker.join(60)
    assert sent_third.headers["X-Webhook-Id"] == str(third.event_id)
    assert sent_third.received_at - sent_second.received_at < 5.0
    assert Delivery.objects.filter(endpoint=endpoint, status=DeliveryStatus.SUCCEEDED).count() == 3
