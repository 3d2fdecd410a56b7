"""The fan-out's mark (`deliveries/pipeline/fanout_mark.py`) and the fan-out task that
stays on (`fanout.events_fan_out` with `top_up`): one message out for the events
committed one by one, none of them left behind."""

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from deliveries import services
from deliveries.models import Delivery, Event
from deliveries.pipeline import fanout, fanout_mark
from deliveries.tasks import fan_out_events
from tests.conftest import wait_until
from tests.fixtures import new_endpoint
from webhooks_core.runtime.tasking import QUEUE_FANOUT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def through_the_task(settings: Any) -> None:
    """Every event goes through the fan-out task (one endpoint would be fanned out by the
    emitting process by default)."""
    settings.WEBHOOKS_INLINE_FAN_OUT_MAX_ENDPOINTS = 0


def queued(redis_client: redis.Redis) -> int:
    return int(redis_client.llen(QUEUE_FANOUT))


def committed(n: int) -> Event:
    """An event emitted in a transaction of its own, committed."""
    with transaction.atomic():
        return services.emit("order.created", {"n": n})


def small_pages(monkeypatch: pytest.MonkeyPatch, *, look: int, last_look: int) -> None:
    """Pages of 5 waiting events; a look takes `look` of them, the last look `last_look`."""
    monkeypatch.setattr(fanout, "FAN_OUT_BATCH_SIZE", 5)
    monkeypatch.setattr(fanout, "TOP_UP_PAGES", look)
    monkeypatch.setattr(fanout, "LAST_LOOK_PAGES", last_look)


def test_a_commit_sends_a_message_only_when_none_is_out(redis_client: redis.Redis) -> None:
    redis_client.flushdb()
    new_endpoint("http://127.0.0.1:9/hook")

    first = committed(1)
    assert queued(redis_client) == 1, "no message was out: this commit sends one"
    second = committed(2)
    assert queued(redis_client) == 1, "one is out, and it will find this event"
    assert not Delivery.objects.exists()

    # The message's task: it takes both, then clears the mark.
    fan_out_events([str(first.pk)])
    assert set(Delivery.objects.values_list("event_id", flat=True)) == {first.pk, second.pk}

    committed(3)
    assert queued(redis_client) == 2, "the mark was cleared: the next commit sends one"


def test_an_event_whose_commit_found_the_mark_is_seen_by_the_task_s_last_look(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race the protocol is for: a commit finds the mark set while the task is making
    its last look. The task clears the mark before that look, so the commit either comes
    before the clear (the look sees it) or after it (it sends a message of its own)."""
    redis_client.flushdb()
    new_endpoint("http://127.0.0.1:9/hook")
    first = committed(1)
    landed: list[Event] = []
    clear = fanout_mark.clear

    def a_commit_lands_just_before_the_clear() -> None:
        if not landed:
            landed.append(committed(2))
            assert queued(redis_client) == 1, "the mark was still set: no message"
        clear()

    monkeypatch.setattr(fanout_mark, "clear", a_commit_lands_just_before_the_clear)
    fan_out_events([str(first.pk)])

    assert set(Delivery.objects.values_list("event_id", flat=True)) == {first.pk, landed[0].pk}


def test_a_steady_stream_of_commits_shares_few_messages(
    celery_worker: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    new_endpoint("http://127.0.0.1:9/hook")
    sent: list[int] = []
    dispatch_fan_outs = fanout_mark.dispatch_fan_outs

    def counted(event_ids: Any) -> None:
        sent.append(len(event_ids))
        dispatch_fan_outs(event_ids)

    monkeypatch.setattr(fanout_mark, "dispatch_fan_outs", counted)
    events = [committed(n) for n in range(60)]

    wait_until(lambda: Delivery.objects.count() == len(events), what="every event to be fanned out")
    assert Event.objects.filter(fanned_out_at__isnull=True).count() == 0
    assert len(sent) < len(events) / 2, f"{len(sent)} messages for {len(events)} commits"


def test_one_message_takes_every_page_of_waiting_events(redis_client: redis.Redis) -> None:
    redis_client.flushdb()
    new_endpoint("http://127.0.0.1:9/hook")
    count = 2 * fanout.FAN_OUT_BATCH_SIZE + 50
    with transaction.atomic():
        for n in range(count):
            services.emit("order.created", {"n": n})

    fan_out_events([])

    assert Delivery.objects.count() == count
    assert not Event.objects.filter(fanned_out_at__isnull=True).exists()


def test_events_older_than_the_grace_are_left_to_the_sweeper(
    redis_client: redis.Redis, settings: Any
) -> None:
    redis_client.flushdb()
    new_endpoint("http://127.0.0.1:9/hook")
    old = services.emit("order.created", {"n": 1})
    Event.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(minutes=5))

    fan_out_events([])
    assert not Delivery.objects.exists(), "the task's look is for the last grace period"

    assert services.sweep().events_fanned_out == 1


def test_outside_a_transaction_an_event_is_one_insert(redis_client: redis.Redis) -> None:
    redis_client.flushdb()
    new_endpoint("http://127.0.0.1:9/hook")
    statements: list[tuple[str, bool]] = []

    def noted(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "pg_class" not in sql:  # (sql_cursor asking whether the table has statistics)
            statements.append((sql.split()[0], context["connection"].get_autocommit()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(noted):
        event = services.emit("order.created", {"n": 1})

    assert statements == [("INSERT", True)], "one statement, committed by itself"
    assert Event.objects.filter(pk=event.pk).exists()
    assert queued(redis_client) == 1, "and its fan-out is seen to"


def test_a_failed_dispatch_clears_the_mark(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis_client.flushdb()

    def broker_down(event_ids: Any) -> None:
        raise redis.ConnectionError("broker down")

    monkeypatch.setattr(fanout_mark, "dispatch_fan_outs", broker_down)
    with pytest.raises(redis.ConnectionError):
        fanout_mark.dispatch(["x"])
    monkeypatch.undo()

    fanout_mark.dispatch(["y"])
    assert queued(redis_client) == 1, "no message went, so the next commit sends one"


def test_a_task_that_fails_clears_the_mark(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis_client.flushdb()
    new_endpoint("http://127.0.0.1:9/hook")
    first = committed(1)
    assert queued(redis_client) == 1

    def database_gone(*args: Any) -> tuple[int, int, Any]:
        raise DatabaseError("the database went away")

    monkeypatch.setattr(fanout, "_look", database_gone)
    with pytest.raises(DatabaseError):
        fan_out_events([str(first.pk)])
    monkeypatch.undo()

    committed(2)
    assert queued(redis_client) == 2, "the mark was cleared: this commit sends a message"


def test_a_large_commit_sends_its_own_message(redis_client: redis.Redis) -> None:
    """So that large transactions are fanned out side by side, not one after another."""
    redis_client.flushdb()
    new_endpoint("http://127.0.0.1:9/hook")
    committed(0)
    assert queued(redis_client) == 1, "the mark is set"

    with transaction.atomic():
        for n in range(fanout_mark.SHARED_MAX_EVENTS + 1):
            services.emit("order.created", {"n": n})
    assert queued(redis_client) == 2


def test_a_task_whose_own_events_fail_still_clears_the_mark_and_looks_again(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The message's first transaction fails (a poison event of its own): the task still
    ends by clearing the mark and fanning out what waits."""
    redis_client.flushdb()
    new_endpoint("http://127.0.0.1:9/hook")
    poison = committed(1)
    waiting = committed(2)
    assert queued(redis_client) == 1, "the second commit found the mark set"
    deliveries_of = fanout._deliveries_of

    def poisoned(event: Event, *args: Any) -> Any:
        if event.pk == poison.pk:
            raise DatabaseError("this event cannot be fanned out")
        return deliveries_of(event, *args)

    monkeypatch.setattr(fanout, "_deliveries_of", poisoned)
    with pytest.raises(DatabaseError):
        fan_out_events([str(poison.pk)])

    assert set(Delivery.objects.values_list("event_id", flat=True)) == {waiting.pk}
    committed(3)
    assert queued(redis_client) == 2, "the mark was cleared"


def test_more_than_a_look_s_pages_are_all_fanned_out(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis_client.flushdb()
    new_endpoint("http://127.0.0.1:9/hook")
    small_pages(monkeypatch, look=2, last_look=2)
    with transaction.atomic():
        for n in range(33):
            services.emit("order.created", {"n": n})
    redis_client.flushdb()

    fan_out_events([])

    assert Delivery.objects.count() == 33
    assert queued(redis_client) == 0, "the looks went on from where they stopped"


def test_events_inserted_long_before_their_commit_send_their_own_message(
    redis_client: redis.Redis, settings: Any
) -> None:
    """A task's looks cover the last grace period: an event inserted before it would be
    missed, so its commit does not rely on a message already out."""
    settings.WEBHOOKS_FANOUT_GRACE_SECONDS = 2.0
    redis_client.flushdb()
    new_endpoint("http://127.0.0.1:9/hook")
    committed(0)
    assert queued(redis_client) == 1, "the mark is set"

    fanout_mark.dispatch(["x"], inserted_at=timezone.now() - timedelta(seconds=5))
    assert queued(redis_client) == 2


def test_without_redis_for_the_marks_every_commit_sends_a_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each process would keep its own mark, which the worker could never clear."""
    sent: list[Any] = []
    monkeypatch.setattr(fanout_mark, "dispatch_fan_outs", sent.append)
    monkeypatch.setattr(fanout_mark.conf, "counters", lambda: SimpleNamespace(redis_url=""))
    fanout_mark.dispatch(["a"])
    fanout_mark.dispatch(["b"])
    assert sent == [["a"], ["b"]]


def test_pages_of_held_keyed_events_do_not_keep_the_looks_from_the_events_behind(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Keyed events held back (an earlier event of their key still waits for its fan-out,
    # older than the looks' grace period) that fill a look's pages: the next look goes on
    # after them, so the events behind them are fanned out by this message, not the
    # sweeper's.
    redis_client.flushdb()
    new_endpoint("http://127.0.0.1:9/hook")
    small_pages(monkeypatch, look=1, last_look=1)
    with transaction.atomic():
        first = services.emit("order.created", {"n": 0}, ordering_key="k")
    Event.objects.filter(pk=first.pk).update(
        fanned_out_at=None, created_at=timezone.now() - timedelta(minutes=2)
    )
    Delivery.objects.all().delete()
    with transaction.atomic():
        held = [services.emit("order.created", {"n": n}, ordering_key="k") for n in range(12)]
        free = [services.emit("order.created", {"n": n}) for n in range(3)]
    redis_client.flushdb()

    fan_out_events([])

    fanned_out = set(Delivery.objects.values_list("event_id", flat=True))
    assert fanned_out == {event.pk for event in free}
    assert not fanned_out & {event.pk for event in held}, "held behind their key's first"
