"""Group commit of the owners' recordings (`services.recorder`), on the real database:
rounds that end while another is being written are written together, each under its own
claim, and one round the database refuses costs only that round."""

import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import DataError, connection
from django.db.models.functions import Now
from django.utils import timezone

from deliveries.models import Attempt, Delivery, DeliveryStatus, Endpoint, Event
from deliveries.pipeline import group_commit
from deliveries.pipeline.owner import claims, lease_rows
from deliveries.pipeline.owner.outcomes import DeliveryOutcome
from deliveries.pipeline.record import Deferral, DeliveryClaim, Result, Round, record_rounds
from tests.conftest import wait_until
from tests.fixtures import make_endpoint
from tests.receiver import Receiver
from webhooks_core.retry_policy import Decision, Verdict

pytestmark = pytest.mark.django_db(transaction=True)


def claimed_round(
    receiver: Receiver, verdict: Verdict = Verdict.SUCCEEDED, delay: float = 60
) -> Round:
    """A round of one delivery of a new endpoint, claimed by its owner and answered."""
    endpoint, _ = make_endpoint(receiver)
    token = lease_rows.owner_take(endpoint_id=endpoint.pk)
    assert token is not None
    event = Event.objects.create(type="order.created", data={}, occurred_at=timezone.now())
    Delivery.objects.create(event=event, endpoint=endpoint, next_attempt_at=Now())
    [delivery] = claims.claim_due(endpoint=endpoint, token=token, limit=1)
    started = timezone.now()
    attempt = Attempt(delivery_id=delivery.pk, number=1, started_at=started, duration_ms=3)
    status = 200 if verdict == Verdict.SUCCEEDED else 500
    result = Result(delivery, Decision(verdict, delay_seconds=delay), status, attempt=attempt)
    claim = DeliveryClaim([delivery], token, started, started + timedelta(days=1))
    return Round(claim, endpoint, [result], Deferral([]))


class Writes:
    """`record_rounds` as the recorder calls it, its real work done, the rounds of each
    call noted; the first call waits until `hold_for` more rounds queue behind it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, hold_for: int) -> None:
        self.calls: list[list[Round]] = []
        self.hold_for = hold_for
        real = group_commit.record_rounds

        def record_rounds(rounds: list[Round]) -> Any:
            self.calls.append(list(rounds))
            if len(self.calls) == 1:
                wait_until(lambda: len(group_commit._queue) >= self.hold_for, timeout=10)
            return real(rounds)

        monkeypatch.setattr(group_commit, "record_rounds", record_rounds)


def refuse(r: Round) -> None:
    """A round the database refuses: its attempt's status is beyond its column's range,
    so the attempts' insert fails, and with it the batch."""
    attempt = r.results[0].attempt
    assert attempt is not None
    attempt.response_status = 2**40


def record_in_threads(rounds: list[Round]) -> list[Any]:
    """Each round recorded from a thread of its own, the first one first; what each got."""
    answers: list[Any] = [None] * len(rounds)

    def record(index: int) -> None:
        try:
            answers[index] = group_commit.record_round(rounds[index])
        except Exception as exc:
            answers[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=record, args=(n,)) for n in range(len(rounds))]
    threads[0].start()
    wait_until(lambda: group_commit._writing, timeout=10)
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    return answers


def test_rounds_ending_while_one_is_written_are_written_together(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    rounds = [claimed_round(receiver) for _ in range(5)]
    rounds.append(claimed_round(receiver, Verdict.RETRY))
    writes = Writes(monkeypatch, hold_for=len(rounds) - 1)

    answers = record_in_threads(rounds)

    # The first round alone, then everything that queued meanwhile in one transaction.
    assert [len(call) for call in writes.calls] == [1, len(rounds) - 1]
    for r, answer in zip(rounds, answers, strict=True):
        delivery = r.results[0].delivery
        expected = (
            DeliveryOutcome.SUCCEEDED
            if r.results[0].decision.verdict == Verdict.SUCCEEDED
            else DeliveryOutcome.RETRY_SCHEDULED
        )
        assert answer == {delivery.pk: expected}
        stored = Delivery.objects.get(pk=delivery.pk)
        assert stored.lease_token is None
        assert stored.first_attempt_at == r.results[0].attempt.started_at  # type: ignore[union-attr]
        assert Attempt.objects.filter(delivery_id=delivery.pk).count() == 1
    assert sorted(Delivery.objects.values_list("status", flat=True)) == sorted(
        [DeliveryStatus.SUCCEEDED] * 5 + [DeliveryStatus.PENDING]
    )
    assert not group_commit._writing
    assert not group_commit._queue


def test_a_success_is_written_only_under_its_own_claim(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, taken_over = claimed_round(receiver), claimed_round(receiver)
    # Another owner took the second row over (its lease ran out): our success is not ours
    # to write.
    Delivery.objects.filter(pk=taken_over.results[0].delivery.pk).update(lease_token=uuid.uuid4())
    writes = Writes(monkeypatch, hold_for=1)
    record_in_threads([first, taken_over])
    assert len(writes.calls) == 2
    assert Delivery.objects.get(pk=first.results[0].delivery.pk).status == DeliveryStatus.SUCCEEDED
    other = Delivery.objects.get(pk=taken_over.results[0].delivery.pk)
    assert other.status == DeliveryStatus.SENDING
    assert other.lease_token is not None


def test_a_round_the_database_refuses_costs_only_that_round(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    rounds = [claimed_round(receiver) for _ in range(4)]
    refuse(rounds[2])
    writes = Writes(monkeypatch, hold_for=3)

    answers = record_in_threads(rounds)

    # The batch of three failed as a whole, then each of its rounds was written alone.
    assert [len(call) for call in writes.calls] == [1, 3, 1, 1, 1]
    assert isinstance(answers[2], DataError)
    for index in (0, 1, 3):
        delivery = rounds[index].results[0].delivery
        assert answers[index] == {delivery.pk: DeliveryOutcome.SUCCEEDED}
        assert Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.SUCCEEDED
    assert not group_commit._writing
    assert not group_commit._queue


def test_an_endpoint_deleted_while_its_round_was_out_fails_no_other_round(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = claimed_round(receiver)
    healthy = claimed_round(receiver, Verdict.RETRY)
    deleted = claimed_round(receiver, Verdict.RETRY)
    Endpoint.objects.filter(pk=deleted.endpoint.pk).delete()
    writes = Writes(monkeypatch, hold_for=2)

    answers = record_in_threads([first, healthy, deleted])

    # The two rounds written together, once: the deleted endpoint's round dropped quietly.
    assert [len(call) for call in writes.calls] == [1, 2]
    assert answers[2] == {deleted.results[0].delivery.pk: DeliveryOutcome.LEASE_LOST}
    delivery = healthy.results[0].delivery
    assert answers[1] == {delivery.pk: DeliveryOutcome.RETRY_SCHEDULED}
    assert Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.PENDING
    assert Attempt.objects.filter(delivery_id=delivery.pk).count() == 1
    stored = Endpoint.objects.get(pk=healthy.endpoint.pk)
    assert stored.consecutive_failures == healthy.endpoint.consecutive_failures == 1
    assert not Attempt.objects.filter(delivery_id=deleted.results[0].delivery.pk).exists()


def test_a_batch_written_again_round_by_round_counts_each_failure_once(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, failed = claimed_round(receiver), claimed_round(receiver, Verdict.RETRY)
    # A round the database refuses late in the batch, after the endpoints' health: a
    # deferral past the last time PostgreSQL holds.
    r = claimed_round(receiver)
    refused = Round(r.claim, r.endpoint, [], Deferral([r.results[0].delivery], seconds=2e13))
    writes = Writes(monkeypatch, hold_for=2)

    answers = record_in_threads([first, failed, refused])

    assert [len(call) for call in writes.calls] == [1, 2, 1, 1]
    assert isinstance(answers[2], DataError)
    stored = Endpoint.objects.get(pk=failed.endpoint.pk)
    # The owner's copy as written, not counted once more for the batch that failed.
    assert stored.consecutive_failures == failed.endpoint.consecutive_failures == 1


def test_a_lone_round_is_written_at_once(receiver: Receiver) -> None:
    r = claimed_round(receiver)
    delivery = r.results[0].delivery
    assert group_commit.record_round(r) == {delivery.pk: DeliveryOutcome.SUCCEEDED}
    assert not group_commit._writing


def test_a_waiter_stopped_while_it_was_next_to_write_passes_the_writing_on() -> None:
    # (Module state only: what a time limit raising inside `done.wait()` leaves.)
    ahead, behind = group_commit._Waiter(None), group_commit._Waiter(None)  # type: ignore[arg-type]
    group_commit._queue.extend([ahead, behind])
    group_commit._writing = True
    try:
        ahead.writes_next = True
        group_commit._leave(ahead)
        assert list(group_commit._queue) == [behind]
        assert behind.writes_next
        assert behind.done.is_set()
        group_commit._leave(behind)
        assert not group_commit._queue
        assert not group_commit._writing
    finally:
        group_commit._queue.clear()
        group_commit._writing = False


def test_a_waiter_stopped_in_the_queue_only_leaves_it() -> None:
    waiter = group_commit._Waiter(None)  # type: ignore[arg-type]
    group_commit._queue.append(waiter)
    group_commit._writing = True
    try:
        group_commit._leave(waiter)
        assert not group_commit._queue
        assert group_commit._writing  # the writer at work goes on
    finally:
        group_commit._queue.clear()
        group_commit._writing = False


def test_endpoints_whose_rounds_ended_well_get_their_health_in_one_write(
    receiver: Receiver,
) -> None:
    from django.test.utils import CaptureQueriesContext

    from deliveries.pipeline.record import record_rounds

    well = [claimed_round(receiver) for _ in range(3)]
    failed = claimed_round(receiver, Verdict.RETRY)
    for r in well:
        # Each counted failures before this round: its success must write them off.
        Endpoint.objects.filter(pk=r.endpoint.pk).update(consecutive_failures=2)
        r.endpoint.consecutive_failures = 2
    with CaptureQueriesContext(connection) as queries:
        record_rounds([*well, failed])
    endpoint_writes = [
        q["sql"] for q in queries if q["sql"].startswith(f'UPDATE "{Endpoint._meta.db_table}"')
    ]
    # One for the three that ended well, one for the one that failed.
    assert len(endpoint_writes) == 2
    for r in well:
        stored = Endpoint.objects.get(pk=r.endpoint.pk)
        assert stored.consecutive_failures == r.endpoint.consecutive_failures == 0
        assert stored.last_success_at == r.endpoint.last_success_at is not None
    assert Endpoint.objects.get(pk=failed.endpoint.pk).consecutive_failures == 1


def test_attempts_are_written_with_every_column_as_recorded(receiver: Receiver) -> None:
    """One insert of the rounds' attempts (their rows as one JSON document, on
    PostgreSQL): text that needs quoting in JSON or an array, non-ASCII text, JSON headers,
    an attempt with no answer and a whole number of milliseconds come back as they went
    in; a NUL, which PostgreSQL's text cannot hold, comes back as U+FFFD."""
    answered, unanswered = claimed_round(receiver), claimed_round(receiver, Verdict.RETRY)
    first = answered.results[0].attempt
    assert first is not None
    first.request_headers = {"X-Webhook-Id": 'ab"c', "X-Note": "é, {x}\\ NULL"}
    first.response_status = 200
    first.response_body = 'a "quoted", {braced} \\ body\nNULL \\u0000 \x00 ✓'
    first.duration_ms = 12.5
    second = unanswered.results[0].attempt
    assert second is not None
    second.response_status = None
    second.error = "ConnectionError: refused, {1,2}"
    second.duration_ms = 7

    record_rounds([answered, unanswered])  # one insert of both

    stored = Attempt.objects.get(delivery_id=first.delivery_id)
    assert (stored.number, stored.started_at) == (1, first.started_at)
    assert stored.request_headers == first.request_headers
    assert (stored.response_status, stored.response_body) == (
        200,
        'a "quoted", {braced} \\ body\nNULL \\u0000 \ufffd ✓',
    )
    assert (stored.duration_ms, stored.error) == (12.5, "")
    failed = Attempt.objects.get(delivery_id=second.delivery_id)
    assert (failed.response_status, failed.error, failed.duration_ms) == (None, second.error, 7.0)
    assert failed.request_headers == {}


def skew_worker_clock(monkeypatch: pytest.MonkeyPatch, by: timedelta) -> None:
    """The recording process's clock `by` off the database's."""
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + by)


def due_by_the_database(delivery_id: int) -> bool:
    return Delivery.objects.filter(pk=delivery_id, next_attempt_at__lte=Now()).exists()


def test_a_retry_falls_due_by_the_database_s_clock_whatever_the_worker_s(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    soon = claimed_round(receiver, Verdict.RETRY, delay=0.5)
    later = claimed_round(receiver, Verdict.RETRY, delay=60)
    skew_worker_clock(monkeypatch, timedelta(hours=1))
    record_rounds([soon])
    skew_worker_clock(monkeypatch, -timedelta(hours=2))  # an hour behind
    record_rounds([later])

    # Ahead: due half a second later, not an hour; behind: not due an hour early.
    wait_until(lambda: due_by_the_database(soon.results[0].delivery.pk), timeout=10)
    assert not due_by_the_database(later.results[0].delivery.pk)
    stored = Delivery.objects.annotate(now=Now()).get(pk=later.results[0].delivery.pk)
    assert stored.next_attempt_at is not None
    assert 50 < (stored.next_attempt_at - stored.now).total_seconds() <= 60


def test_a_deferral_falls_due_by_the_database_s_clock_whatever_the_worker_s(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = claimed_round(receiver)
    delivery = r.results[0].delivery
    deferred = Round(r.claim, r.endpoint, [], Deferral([delivery], seconds=0.5))
    skew_worker_clock(monkeypatch, timedelta(hours=1))

    assert record_rounds([deferred]) == [{delivery.pk: DeliveryOutcome.DEFERRED}]

    assert Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.PENDING
    wait_until(lambda: due_by_the_database(delivery.pk), timeout=10)
