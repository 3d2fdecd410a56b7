"""The wakes of one fan-out mark their endpoints in one Redis exchange (`mark_many`), not
one round trip per endpoint."""

import uuid
from typing import Any

import pytest
import redis

from deliveries.pipeline import wake
from webhooks_core.runtime.tasking import QUEUE_DELIVERY


def test_a_fan_outs_wakes_mark_in_one_exchange(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis_client.flushdb()
    endpoints = [str(uuid.uuid4()) for _ in range(10)]
    book = wake.wake_book()
    exchanges: list[int] = []
    plain = type(book).mark_many

    def counted(self: Any, wanted: list[str], *args: Any) -> list[bool]:
        exchanges.append(len(wanted))
        return plain(self, wanted, *args)

    monkeypatch.setattr(type(book), "mark_many", counted)
    monkeypatch.setattr(type(book), "mark", lambda *a: pytest.fail("one exchange per endpoint"))

    assert wake.wake_endpoints(endpoints) == 10
    assert exchanges == [10]
    assert redis_client.llen(QUEUE_DELIVERY) == 10
    assert wake.wake_endpoints(endpoints) == 0, "folded into the messages already out"
