"""The consumer's API over real HTTP, through the Procfile's `web` line (gunicorn, gevent),
on PostgreSQL: a polling endpoint read with its key only, each message verified with the
official `standardwebhooks` library, errors, long polling and its bounds, a consumer group
of three members with expiring leases, and a push endpoint's catch-up key."""

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from standardwebhooks.webhooks import Webhook

from deliveries.models import (
    Attempt,
    Delivery,
    DeliveryStatus,
    Event,
    PollConsumer,
    PollRecord,
)
from deliveries.pipeline.sweep import sweep
from deliveries.polling import positions
from tests.conftest import wait_until
from tests.deliveries.polling.helpers import (
    WEB_ENV,
    create_poll_endpoint,
    delivered,
    emit,
    http,
)
from tests.helpers import procfile_web

# Events are fanned out by the emitting process (no worker runs here).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("inline_fan_out")]


@pytest.fixture(scope="module")
def web(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # After the test database exists: the process is pointed at it.
    with procfile_web(tmp_path_factory.mktemp("web"), **WEB_ENV) as (base, _):
        yield base


def read_all(url: str, key: str, count: int) -> list[dict[str, Any]]:
    """Read on from iterator to iterator until ``count`` messages came: a row becomes
    visible once every older transaction of the database cluster has ended."""
    messages: list[dict[str, Any]] = []
    iterator = ""

    def more() -> bool:
        nonlocal iterator
        status, page, _ = http(f"{url}?iterator={iterator}" if iterator else url, key)
        assert status == 200, page
        messages.extend(page["data"])
        iterator = page["iterator"]
        return len(messages) >= count

    wait_until(more, what=f"{count} messages")
    return messages


def verified(message: dict[str, Any], secret: str) -> None:
    """The official library accepts the message's body with its headers and the secret."""
    payload = Webhook(secret).verify(message["body"], message["headers"])
    assert payload == message["payload"] == json.loads(message["body"])
    assert message["headers"]["webhook-id"] == message["id"] == payload["id"]
    assert message["type"] == payload["type"]


def test_a_polling_endpoint_is_read_with_its_key_and_each_message_verifies(
    web: str, token: str
) -> None:
    created = create_poll_endpoint(web, token)
    endpoint_id, key = created["id"], created["poll_key"]
    assert created["mode"] == "poll"
    assert created["url"] == ""
    assert key.startswith("whpoll_")
    assert endpoint_id in created["poll_url"]
    status, shown, _ = http(f"{web}/api/v1/endpoints/{endpoint_id}", token)
    assert status == 200
    assert "poll_key" not in shown
    assert shown["poll_url"] == created["poll_url"]

    ids = emit(3)
    delivered(endpoint_id, 3)
    status, first, _ = http(f"{created['poll_url']}?limit=2", key)
    assert status == 200, first
    assert [m["id"] for m in first["data"]] == ids[:2]
    assert first["done"] is False
    status, second, _ = http(f"{created['poll_url']}?iterator={first['iterator']}", key)
    assert [m["id"] for m in second["data"]] == ids[2:]
    assert second["done"] is True
    for message in first["data"] + second["data"]:
        verified(message, created["secret"])
    status, third, _ = http(f"{created['poll_url']}?iterator={second['iterator']}", key)
    assert (status, third["data"], third["done"]) == (200, [], True)

    # The rows wait for their consumer: no owner or sweeper ever sends them.
    sweep()
    rows = Delivery.objects.filter(endpoint_id=endpoint_id)
    assert set(rows.values_list("status", flat=True)) == {DeliveryStatus.AVAILABLE}
    assert not Attempt.objects.filter(delivery__endpoint_id=endpoint_id).exists()
    # Polls that handed out messages are recorded.
    assert sorted(PollRecord.objects.values_list("count", flat=True)) == [1, 2]


def test_errors_are_json_and_never_500(web: str, token: str) -> None:
    created = create_poll_endpoint(web, token)
    other = create_poll_endpoint(web, token)
    url, key = created["poll_url"], created["poll_key"]
    assert http(url, None)[0] == 401
    assert http(url, "whpoll_unknown")[0] == 401
    status, body, _ = http(url, token)
    assert status == 403
    assert "poll key" in body["detail"]
    assert http(other["poll_url"], key)[0] == 404
    assert http(f"{web}/api/v1/endpoints", key)[0] == 401  # the key opens nothing else
    for query in (
        "iterator=it1_garbage",
        "iterator=nope",
        "limit=0",
        "limit=251",
        "wait=31",
        "x=1",
    ):
        status, body, _ = http(f"{url}?{query}", key)
        assert status == 400, (query, body)
        assert isinstance(body, dict)
    old = positions.encode(positions.Cursor(created["id"], positions.Position(0, 1), at=0))
    status, body, _ = http(f"{url}?iterator={old}", key)
    assert status == 410
    assert "retention" in body["detail"]
    theirs = positions.encode(positions.Cursor(other["id"], positions.Position(0, 1), at=0))
    assert http(f"{url}?iterator={theirs}", key)[0] == 400
    commit = f"{url}/consumers/g/commit"
    assert http(commit, key, "POST", {"iterator": "bad"})[0] == 400
    assert http(commit, key, "POST", {"position": "x"})[0] == 400
    assert http(f"{url}/consumers/g/seek", key, "POST", {})[0] == 400
    assert http(f"{url}/consumers/g?lease=0", key)[0] == 400

    # A rotated key stops working at once.
    status, rotated, _ = http(
        f"{web}/api/v1/endpoints/{created['id']}/rotate-poll-key", token, "POST"
    )
    assert status == 200
    assert rotated["poll_key"] != key
    assert http(url, key)[0] == 401
    assert http(url, rotated["poll_key"])[0] == 200


def test_a_long_poll_answers_within_a_second_of_the_commit(web: str, token: str) -> None:
    created = create_poll_endpoint(web, token)
    url, key = created["poll_url"], created["poll_key"]
    started = time.monotonic()
    status, empty, _ = http(f"{url}?wait=1", key)
    assert (status, empty["data"]) == (200, [])
    assert time.monotonic() - started >= 1.0

    answer: dict[str, Any] = {}

    def poll() -> None:
        answer["response"] = http(f"{url}?wait=20", key)
        answer["at"] = time.monotonic()

    waiter = threading.Thread(target=poll)
    waiter.start()
    (event_id,) = emit(1)
    committed_at = time.monotonic()
    waiter.join(25)
    status, page, _ = answer["response"]
    assert status == 200
    assert [m["id"] for m in page["data"]] == [event_id]
    assert answer["at"] - committed_at < 1.0


def test_long_polls_are_bounded_per_key(tmp_path: Path, token: str) -> None:
    with procfile_web(tmp_path, WEBHOOKS_POLL_MAX_WAITS_PER_KEY="2", **WEB_ENV) as (base, _):
        created = create_poll_endpoint(base, token)
        url, key = created["poll_url"], created["poll_key"]

        def holder() -> None:
            while http(f"{url}?wait=15", key)[0] == 429:
                continue  # refused while the check below took a place: ask again

        holders = [threading.Thread(target=holder) for _ in range(2)]
        for thread in holders:
            thread.start()
        refused: dict[str, Any] = {}

        def third_refused() -> bool:
            status, body, headers = http(f"{url}?wait=1", key)
            refused.update(body=body, headers=headers)
            return status == 429

        wait_until(third_refused, timeout=20, what="a third long poll refused")
        assert refused["headers"]["Retry-After"]
        assert "detail" in refused["body"]
        emit(1)  # lets the two holders go
        for thread in holders:
            thread.join(20)


def test_a_consumer_group_of_three_with_expiring_leases(web: str, token: str) -> None:
    created = create_poll_endpoint(web, token)
    url, key, lease = created["poll_url"], created["poll_key"], 2.0
    ids = emit(24)
    delivered(created["id"], 24)
    lock = threading.Lock()
    handed: dict[str, float] = {}  # message id -> when it was last handed out, uncommitted
    committed: list[str] = []
    problems: list[str] = []

    def member(number: int) -> None:
        batches = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status, page, _ = http(f"{url}/consumers/billing?limit=3&lease={lease}", key)
            if status != 200:
                problems.append(f"member {number}: {status} {page}")
                return
            now = time.monotonic()
            got = [m["id"] for m in page["data"]]
            with lock:
                for message_id in got:
                    if message_id in committed:
                        problems.append(f"{message_id} handed out after its commit")
                    last = handed.get(message_id)
                    if last is not None and now - last < lease - 0.3:
                        problems.append(f"{message_id} handed out twice within its lease")
                    handed[message_id] = now
                if len(committed) == len(ids):
                    return
            if not got:
                time.sleep(0.1)  # the others' leases run; a member polls again
                continue
            batches += 1
            if number == 0 and batches % 2:
                continue  # this member "dies" with its batch: the lease expires
            status, body, _ = http(
                f"{url}/consumers/billing/commit",
                key,
                "POST",
                {"iterator": page["iterator"]},
                headers={"Idempotency-Key": str(uuid4())},
            )
            if status != 200:
                problems.append(f"commit: {status} {body}")
            with lock:
                committed.extend(got)
                for message_id in got:
                    handed.pop(message_id, None)

    members = [threading.Thread(target=member, args=(n,)) for n in range(3)]
    for thread in members:
        thread.start()
    for thread in members:
        thread.join(70)
    assert not problems, problems
    assert sorted(committed) == sorted(ids)  # every message handed out, each committed once
    consumer = PollConsumer.objects.get(endpoint_id=created["id"], name="billing")
    assert not consumer.leases.exists()
    last = Delivery.objects.filter(endpoint_id=created["id"]).order_by("-pk").first()
    assert last is not None
    assert consumer.committed_id == last.pk


def test_a_push_endpoint_gets_a_catch_up_key(web: str, token: str) -> None:
    status, created, _ = http(
        f"{web}/api/v1/endpoints",
        token,
        "POST",
        {"url": "http://127.0.0.1:9/hook", "event_types": ["invoice.paid"]},
    )
    assert status == 201
    assert created["mode"] == "push"
    assert created["poll_url"] is None
    assert "poll_key" not in created
    ids = emit(2)
    delivered(created["id"], 2)
    status, rotated, _ = http(
        f"{web}/api/v1/endpoints/{created['id']}/rotate-poll-key", token, "POST"
    )
    assert status == 200
    assert created["id"] in rotated["poll_url"]
    messages = read_all(rotated["poll_url"], rotated["poll_key"], len(ids))
    assert [m["id"] for m in messages] == ids
    for message in messages:
        verified(message, created["secret"])
    # Whatever their status: the owner still has them (no worker runs here).
    assert Event.objects.filter(pk__in=ids).count() == 2


def test_a_hundred_long_polls_cost_the_web_process_nothing(tmp_path: Path, token: str) -> None:
    """100 consumers long-polling one web process (one gevent worker): other requests are
    answered as fast as before, and every waiter gets the message when it comes."""
    bounds = {
        "WEBHOOKS_POLL_MAX_WAITS_PER_KEY": "100",
        "WEBHOOKS_POLL_MAX_WAITS_PER_PROCESS": "100",
    }
    with procfile_web(tmp_path, **bounds, **WEB_ENV) as (base, _):
        created = create_poll_endpoint(base, token)
        url, key = created["poll_url"], created["poll_key"]

        def median_latency() -> float:
            took = []
            for _ in range(21):
                started = time.monotonic()
                status, _, _ = http(f"{base}/api/v1/endpoints/{created['id']}", token)
                assert status == 200
                took.append(time.monotonic() - started)
            return sorted(took)[10]

        before = median_latency()
        answers: list[tuple[int, Any, dict[str, str]]] = []

        def consumer() -> None:
            while True:  # refused while the check below took a place: ask again
                answer = http(f"{url}?wait=25", key)
                if answer[0] != 429:
                    answers.append(answer)
                    return

        waiters = [threading.Thread(target=consumer) for _ in range(100)]
        for waiter in waiters:
            waiter.start()
        # The process bound is 100: a 101st long poll is refused once all 100 wait.
        wait_until(lambda: http(f"{url}?wait=1", key)[0] == 429, timeout=20, what="100 long polls")
        during = median_latency()
        (event_id,) = emit(1)
        for waiter in waiters:
            waiter.join(30)
        assert len(answers) == 100
        assert all(status == 200 for status, _, _ in answers)
        assert all([m["id"] for m in page["data"]] == [event_id] for _, page, _ in answers)
        print(f"median latency before {before * 1000:.1f} ms, during {during * 1000:.1f} ms")
        assert during < max(3 * before, 0.1)
