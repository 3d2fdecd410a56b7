"""`WakeBook.mark_many`: the marks of many endpoints in one exchange (a Redis pipeline),
with the same answers as one `mark` each."""

import uuid

import redis

from deliveries.pipeline.wake_marks import KEY_PREFIX, LocalWakeBook, RedisWakeBook


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
