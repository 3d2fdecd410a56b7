"""`WakeBook.mark_many`: the marks of many endpoints in one exchange (a Redis pipeline),
with the same answers as one `mark` each."""

import functools
import time
import uuid

import redis

from deliveries.pipeline.wake_marks import (
    FAN_OUT_KEY,
    KEY_PREFIX,
    LocalWakeBook,
    RedisWakeBook,
    WakeBook,
)
from tests.conftest import wait_until


def test_mark_many_answers_as_one_mark_each(redis_client: redis.Redis) -> None:
    url = redis_client.connection_pool.connection_kwargs
    book = RedisWakeBook(
        f"redis://{url.get('host', '127.0.0.1')}:{url.get('port', 6379)}/{url.get('db', 0)}"
    )
    local = LocalWakeBook()
    fresh, marked = str(uuid.uuid4()), str(uuid.uuid4())
    for each in (book, local):
        assert each.mark(marked, 0.0, 60.0, -1.0) is True
    for each in (book, local):
        # A new endpoint dispatches; one marked due now does not, unless its mark is stale.
        assert each.mark_many([fresh, marked], 0.0, 60.0, -1.0) == [True, False]
        assert each.mark_many([marked], 0.0, 60.0, -1.0) == [False]
    redis_client.delete(KEY_PREFIX + fresh, KEY_PREFIX + marked)


def _book(redis_client: redis.Redis) -> RedisWakeBook:
    url = redis_client.connection_pool.connection_kwargs
    return RedisWakeBook(
        f"redis://{url.get('host', '127.0.0.1')}:{url.get('port', 6379)}/{url.get('db', 0)}"
    )


def test_mark_many_loads_its_script_again_after_redis_forgot_it(redis_client: redis.Redis) -> None:
    book = _book(redis_client)
    endpoint = str(uuid.uuid4())
    redis_client.script_flush()  # as after a restart of Redis
    assert book.mark_many([endpoint], 0.0, 60.0, -1.0) == [True]
    assert book.mark_many([endpoint], 0.0, 60.0, -1.0) == [False]
    redis_client.delete(KEY_PREFIX + endpoint)


def test_the_fan_out_mark_is_taken_once_until_cleared(redis_client: redis.Redis) -> None:
    redis_client.delete(FAN_OUT_KEY + "db")
    for book in (_book(redis_client), LocalWakeBook()):
        assert book.mark_fan_out("db", 10.0) is True, "no message out: this commit dispatches"
        assert book.mark_fan_out("db", 10.0) is False, "one is out: it will see this commit"
        book.clear_fan_out("db")
        assert book.mark_fan_out("db", 10.0) is True
        assert book.mark_fan_out("other", 10.0) is True, "another database's mark is its own"
        book.clear_fan_out("db")
        book.clear_fan_out("other")


def test_the_fan_out_mark_expires(redis_client: redis.Redis) -> None:
    redis_client.delete(FAN_OUT_KEY + "db")
    books: list[WakeBook] = [_book(redis_client), LocalWakeBook()]
    for book in books:
        assert book.mark_fan_out("db", 0.05) is True
        wait_until(
            functools.partial(book.mark_fan_out, "db", 0.05), timeout=5, what="the mark to expire"
        )
        book.clear_fan_out("db")


def test_mark_many_runs_again_only_what_did_not_run(redis_client: redis.Redis) -> None:
    """Scripts flushed between two marks of one pipeline: the first ran (its mark is set,
    and running it again would answer "folded"), the second is run again."""
    book = _book(redis_client)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    answers = [1, redis.exceptions.NoScriptError("NOSCRIPT")]
    calls: list[list[str]] = []
    mark_all = book._mark_all

    def flushed_midway(keys: list[str], args: list[float]) -> list[object]:
        calls.append(keys)
        return list(answers) if len(calls) == 1 else mark_all(keys, args)

    book._mark_all = flushed_midway  # type: ignore[method-assign]
    assert book.mark_many([first, second], 0.0, 60.0, -1.0) == [True, True]
    assert calls == [[KEY_PREFIX + first, KEY_PREFIX + second], [KEY_PREFIX + second]]
    redis_client.delete(KEY_PREFIX + first, KEY_PREFIX + second)


def test_a_hold_s_mark_folds_every_wake_until_it_expires(redis_client: redis.Redis) -> None:
    books: list[WakeBook] = [_book(redis_client), LocalWakeBook()]
    for book in books:
        endpoint = str(uuid.uuid4())
        book.held(endpoint, 30.0, 60.0)
        # An owner that takes the lease marks the endpoint worked; a cleared mark is gone.
        book.working(endpoint, 60.0)
        assert book.due_at(endpoint) == 0.0
        book.clear(endpoint)
        assert book.due_at(endpoint) is None
        book.held(endpoint, 30.0, 60.0)
        # Due now, sooner than the hold's end: folded (a regular mark would dispatch it).
        assert book.mark(endpoint, 0.0, 60.0, -1.0) is False
        assert book.mark_many([endpoint], 0.0, 60.0, -1.0) == [False]
        # The sweeper's check: the mark is not stale before the hold's end.
        assert book.mark(endpoint, 0.0, 60.0, 5.0) is False
        due = book.due_at(endpoint)
        assert due is not None
        assert 25 < due - time.time() <= 30.01  # (written to the millisecond)
        short = str(uuid.uuid4())
        book.held(short, 0.0, 0.2)
        expired = functools.partial(book.mark, short, 0.0, 60.0, -1.0)
        wait_until(expired, what="the hold's mark to expire")
        redis_client.delete(KEY_PREFIX + endpoint, KEY_PREFIX + short)
