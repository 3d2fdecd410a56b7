"""`emit()` outside any transaction (what `POST /api/v1/events` does;
`fanout._insert_alone`): for a tenant with few endpoints, the event and its deliveries in
one statement; otherwise, or when that fails, the event alone and its fan-out message."""

import logging
from typing import Any

import pytest
import redis
from django.db import DatabaseError, connection, connections

from deliveries import services, signals
from deliveries.models import Delivery, Endpoint, EndpointState, Event
from deliveries.pipeline import fanout
from tests.fixtures import new_endpoint
from webhooks_core.runtime.tasking import QUEUE_FANOUT

pytestmark = pytest.mark.django_db(transaction=True)


def statements_of(work: Any) -> tuple[Any, list[tuple[str, bool]]]:
    """What `work()` returns, and each SQL statement's first word with whether it ran in
    autocommit mode (on its own) or in a transaction (not counting `sql_cursor`'s look at
    PostgreSQL's statistics of a table, which a new test database has none of)."""
    seen: list[tuple[str, bool]] = []

    def noted(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "pg_class" not in sql:
            seen.append((sql.split()[0], context["connection"].get_autocommit()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(noted):
        result = work()
    return result, seen


def test_an_event_and_its_deliveries_are_written_in_one_statement(
    inline_fan_out: None, redis_client: redis.Redis
) -> None:
    redis_client.flushdb()
    endpoints = {new_endpoint(f"http://127.0.0.1:9/{n}").pk for n in range(2)}

    event, seen = statements_of(lambda: services.emit("order.created", {"n": 1}))

    # The endpoints read, the event and its deliveries together, the endpoints read again
    # (none created meanwhile): each statement commits by itself (no BEGIN, no COMMIT).
    assert seen == [("SELECT", True), ("WITH", True), ("SELECT", True)]
    stored = Event.objects.get(pk=event.pk)
    assert stored.fanned_out_at is not None
    assert stored.created_at == event.created_at, "the database's clock, read back"
    assert set(Delivery.objects.values_list("endpoint_id", flat=True)) == endpoints
    assert redis_client.llen(QUEUE_FANOUT) == 0, "no fan-out message"


def test_a_tenant_above_the_limit_gets_the_event_alone_and_the_fan_out_task(
    settings: Any, redis_client: redis.Redis
) -> None:
    settings.WEBHOOKS_INLINE_FAN_OUT_MAX_ENDPOINTS = 1
    redis_client.flushdb()
    for n in range(2):
        new_endpoint(f"http://127.0.0.1:9/{n}")

    event, seen = statements_of(lambda: services.emit("order.created", {"n": 1}))

    assert seen == [("SELECT", True), ("INSERT", True)], "the event, committed by itself"
    assert Event.objects.get(pk=event.pk).fanned_out_at is None
    assert not Delivery.objects.exists()
    assert redis_client.llen(QUEUE_FANOUT) == 1, "its fan-out message"


def test_an_endpoint_deleted_after_the_read_costs_the_event_nothing(
    inline_fan_out: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = new_endpoint("http://127.0.0.1:9/kept")
    gone = new_endpoint("http://127.0.0.1:9/gone")
    read = fanout._few_candidates
    reads: list[int] = []

    def then_one_goes(tenant: str | None, limit: int) -> list[Endpoint] | None:
        found = read(tenant, limit)
        reads.append(len(found or []))
        if len(reads) == 1:
            Endpoint.objects.filter(pk=gone.pk).delete()  # its deliveries would fail COMMIT
        return found

    monkeypatch.setattr(fanout, "_few_candidates", then_one_goes)
    event = services.emit("order.created", {"n": 1})

    assert reads == [2, 1], "the transaction failed on the deleted endpoint; read again"
    assert list(Delivery.objects.values_list("endpoint_id", flat=True)) == [kept.pk]
    assert Event.objects.filter(pk=event.pk, fanned_out_at__isnull=False).count() == 1


def test_when_the_transaction_fails_the_event_is_written_alone_then_fanned_out(
    inline_fan_out: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint = new_endpoint("http://127.0.0.1:9/hook")
    calls: list[int] = []

    def fails(event: Event, rows: Any) -> None:
        calls.append(len(rows))
        raise DatabaseError("the insert of the event with its deliveries fails")

    monkeypatch.setattr(fanout, "insert_with", fails)
    with caplog.at_level(logging.ERROR, logger="deliveries.pipeline.fanout"):
        event = services.emit("order.created", {"n": 1})

    assert calls == [1]
    assert "writing it alone" in caplog.text
    # Not written with its deliveries; written alone, then fanned out after its commit.
    assert Event.objects.filter(pk=event.pk, fanned_out_at__isnull=False).count() == 1
    assert list(Delivery.objects.values_list("event_id", "endpoint_id")) == [
        (event.pk, endpoint.pk)
    ]


def test_few_candidates_are_the_orm_s_endpoints_with_the_same_values() -> None:
    disabled = new_endpoint("http://127.0.0.1:9/off", filter={"type": "order.created"})
    Endpoint.objects.filter(pk=disabled.pk).update(state=EndpointState.DISABLED)
    mine = [
        new_endpoint("http://127.0.0.1:9/a", tenant="acme", event_types=["order.*"]),
        new_endpoint("http://127.0.0.1:9/b", tenant="acme", ordered_delivery=True),
    ]
    new_endpoint("http://127.0.0.1:9/c", tenant="other")
    untenanted = new_endpoint("http://127.0.0.1:9/d", filter={"data.n": {"$gt": 1}})
    fields = [name for name in fanout._CANDIDATE_FIELDS]

    def values(endpoints: Any) -> list[tuple[Any, ...]]:
        return [tuple(getattr(e, name) for name in fields) for e in endpoints]

    for tenant, expected in (("acme", mine), (None, [untenanted])):
        found = fanout._few_candidates(tenant, 2)
        assert found is not None
        orm = list(fanout._candidate_endpoints({tenant}))
        assert values(found) == values(orm)
        assert {e.pk for e in found} == {e.pk for e in expected}
    assert fanout._few_candidates("acme", 1) is None, "more than the limit: no models"
    assert fanout._few_candidates("nobody", 1) == []


def test_a_tenant_found_above_the_limit_is_not_read_again_for_a_second(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.WEBHOOKS_INLINE_FAN_OUT_MAX_ENDPOINTS = 1
    monkeypatch.setattr(fanout, "MANY_ENDPOINTS_HINT_SECONDS", 60.0)  # (a slow machine)
    for n in range(2):
        new_endpoint(f"http://127.0.0.1:9/{n}")
    assert fanout._few_candidates(None, 1) is None

    _, seen = statements_of(lambda: fanout._few_candidates(None, 1))
    assert seen == [], "known to have too many: no read"
    assert fanout._few_candidates(None, 2) is not None, "another limit is its own question"

    gone = Endpoint.objects.order_by("pk").first()
    assert gone is not None
    gone.delete()  # this process changed an endpoint: the hint is forgotten
    found, seen = statements_of(lambda: fanout._few_candidates(None, 1))
    assert found is not None
    assert len(found) == 1
    assert seen == [("SELECT", True)]


def test_an_endpoint_created_between_the_read_and_the_write_gets_the_event(
    inline_fan_out: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = new_endpoint("http://127.0.0.1:9/first")
    read = fanout._few_candidates
    late: list[Endpoint] = []

    def then_one_comes(tenant: str | None, limit: int) -> list[Endpoint] | None:
        found = read(tenant, limit)
        if not late:
            late.append(new_endpoint("http://127.0.0.1:9/late"))  # committed before the event
        return found

    monkeypatch.setattr(fanout, "_few_candidates", then_one_comes)
    event = services.emit("order.created", {"n": 1})

    assert set(Delivery.objects.filter(event=event).values_list("endpoint_id", flat=True)) == {
        first.pk,
        late[0].pk,
    }


def test_a_tenant_without_endpoints_gets_its_event_written_and_nothing_else(
    inline_fan_out: None, redis_client: redis.Redis
) -> None:
    redis_client.flushdb()
    new_endpoint("http://127.0.0.1:9/acme", tenant="acme")

    event, seen = statements_of(lambda: services.emit("order.created", {"n": 1}))

    # The read, the event, and the second read (no endpoint of this tenant, none since).
    assert seen == [("SELECT", True), ("INSERT", True), ("SELECT", True)]
    assert Event.objects.filter(pk=event.pk, fanned_out_at__isnull=False).exists()
    assert not Delivery.objects.exists()
    assert redis_client.llen(QUEUE_FANOUT) == 0


def test_a_failure_after_the_write_neither_fails_the_emit_nor_writes_twice(
    inline_fan_out: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = new_endpoint("http://127.0.0.1:9/hook")
    insert = fanout.insert_with

    def written_then_fails(event: Event, rows: Any) -> None:
        insert(event, rows)
        raise DatabaseError("the connection broke after the commit")

    monkeypatch.setattr(fanout, "insert_with", written_then_fails)
    event = services.emit("order.created", {"n": 1})

    assert Event.objects.filter(pk=event.pk).count() == 1
    assert list(Delivery.objects.values_list("event_id", "endpoint_id")) == [
        (event.pk, endpoint.pk)
    ]


@pytest.mark.parametrize("inline", [True, False], ids=["with-its-deliveries", "alone"])
def test_listeners_of_event_emitted_hear_an_event_emitted_outside_a_transaction(
    settings: Any, redis_client: redis.Redis, inline: bool
) -> None:
    # The write commits by itself, so the signal goes at once: once, with the event as
    # stored, whichever way it was written; a listener that fails costs the emit nothing.
    settings.WEBHOOKS_INLINE_FAN_OUT_MAX_ENDPOINTS = 10 if inline else 0
    redis_client.flushdb()
    new_endpoint("http://127.0.0.1:9/hook")
    heard: list[tuple[Any, bool]] = []

    def listener(sender: Any, event: Event, **_: Any) -> None:
        # (From another connection: the event is committed when the signal comes.)
        other = connections.create_connection("default")
        try:
            with other.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM deliveries_event WHERE id = %s", [event.pk])
                heard.append((event.pk, cursor.fetchone()[0] == 1))
        finally:
            other.close()

    def failing(sender: Any, **_: Any) -> None:
        raise RuntimeError("a listener's bug")

    signals.event_emitted.connect(listener, weak=False)
    signals.event_emitted.connect(failing, weak=False)
    try:
        event = services.emit("order.created", {"n": 1})
    finally:
        signals.event_emitted.disconnect(listener)
        signals.event_emitted.disconnect(failing)

    assert heard == [(event.pk, True)]
    assert Event.objects.filter(pk=event.pk).exists()
    assert Delivery.objects.filter(event_id=event.pk).count() == (1 if inline else 0)
    assert redis_client.llen(QUEUE_FANOUT) == (0 if inline else 1)
