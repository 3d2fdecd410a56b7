"""`sql_cursor`: our own hot statements, bound on the server and prepared by PostgreSQL,
still going through Django's cursor wrapping."""

from typing import Any

import pytest
from django.conf import settings
from django.db import DatabaseError, connection, transaction

from webhooks_core.db import sql
from webhooks_core.db.sql import sql_cursor

pytestmark = pytest.mark.django_db

STATEMENT = "SELECT %s::int + 1 AS webhooks_sql_cursor_test"


def _prepared(fragment: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            [f"%{fragment}%"],
        )
        return int(cursor.fetchone()[0])


def test_the_reference_deployment_turns_preparing_on() -> None:
    assert settings.DATABASES["default"]["OPTIONS"]["prepare_threshold"] == 5
    connection.ensure_connection()
    assert connection.connection.prepare_threshold == 5


def test_a_statement_is_prepared_on_its_first_run_and_seen_by_django_s_wrappers() -> None:
    seen: list[str] = []

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count), sql_cursor() as cursor:
        cursor.execute(STATEMENT, [1])
        assert cursor.fetchone()[0] == 2
    assert _prepared("webhooks_sql_cursor_test") == 1
    with connection.execute_wrapper(count):
        for n in range(5):
            with sql_cursor() as cursor:
                cursor.execute(STATEMENT, [n])
                assert cursor.fetchone()[0] == n + 1

    assert seen == [STATEMENT] * 6
    assert _prepared("webhooks_sql_cursor_test") == 1


def test_nothing_is_prepared_where_the_host_turned_preparing_off() -> None:
    connection.ensure_connection()
    threshold = connection.connection.prepare_threshold
    connection.connection.prepare_threshold = None  # Django's default
    try:
        for n in range(3):
            with sql_cursor() as cursor:
                cursor.execute("SELECT %s::int AS webhooks_sql_unprepared_test", [n])
    finally:
        connection.connection.prepare_threshold = threshold
    assert _prepared("webhooks_sql_unprepared_test") == 0


def test_django_s_cursors_never_prepare() -> None:
    for n in range(8):
        with connection.cursor() as cursor:
            cursor.execute("SELECT %s::int AS webhooks_orm_cursor_test", [n])
    assert _prepared("webhooks_orm_cursor_test") == 0


def test_errors_are_django_s_and_leave_the_connection_usable() -> None:
    with pytest.raises(DatabaseError), transaction.atomic(), sql_cursor() as cursor:
        cursor.execute("SELECT * FROM no_such_table_here WHERE id = %s", [1])
    with sql_cursor() as cursor:
        cursor.execute("SELECT %s::int", [41])
        assert cursor.fetchone()[0] == 41


def test_where_queries_are_logged_the_statements_are_logged_with_their_values() -> None:
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries, sql_cursor() as cursor:
        cursor.execute("SELECT %s::int AS webhooks_sql_logged_test", [7])
    assert [q["sql"] for q in queries] == ["SELECT 7::int AS webhooks_sql_logged_test"]


@pytest.fixture
def statistics_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """No table known to have statistics, none asked about yet."""
    monkeypatch.setattr(sql, "_ANALYSED", set())
    monkeypatch.setattr(sql, "_ASKED_AT", {})


@pytest.mark.usefixtures("statistics_unknown")
def test_a_statement_is_prepared_only_once_the_tables_it_reads_have_statistics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A plan PostgreSQL keeps for a prepared statement is made for its tables as they are
    # then: on a table never analysed, for a few rows, and kept while it grows.
    monkeypatch.setattr(sql, "STATISTICS_RECHECK_SECONDS", 0.0)
    table = "webhooks_sql_statistics_test"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {table} (id integer PRIMARY KEY)")
        cursor.execute(f"INSERT INTO {table} SELECT generate_series(1, 10)")
    statement = f"SELECT id FROM {table} WHERE id = %s"  # noqa: S608 (the test's table)

    def run() -> int:
        with sql_cursor([table]) as cursor:
            cursor.execute(statement, [3])
            return int(cursor.fetchone()[0])

    assert [run() for _ in range(7)] == [3] * 7  # (past psycopg's threshold of 5)
    assert _prepared(table) == 0

    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {table}")
    assert run() == 3
    assert _prepared(table) == 1


@pytest.mark.usefixtures("statistics_unknown")
def test_the_statistics_are_asked_for_at_most_every_few_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = "webhooks_sql_statistics_asked_test"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {table} (id integer)")
    asked: list[str] = []

    def count(execute: Any, sql_: str, params: Any, many: bool, context: Any) -> Any:
        if "pg_class" in sql_:
            asked.append(sql_)
        return execute(sql_, params, many, context)

    clock = [1000.0]
    monkeypatch.setattr(sql.time, "monotonic", lambda: clock[0])
    with connection.execute_wrapper(count):
        for _ in range(3):
            with sql_cursor([table]) as cursor:
                cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608
        assert len(asked) == 1
        clock[0] += sql.STATISTICS_RECHECK_SECONDS
        with sql_cursor([table]) as cursor:
            cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608
    assert len(asked) == 2


def test_insert_row_stores_what_save_would_and_reads_the_database_s_defaults_back() -> None:
    from django.db import IntegrityError
    from django.utils import timezone

    from deliveries.models import Event

    kwargs: dict[str, Any] = {
        "type": "order.created",
        "occurred_at": timezone.now(),
        "data": {"n": [1, "two"], "ok": True},
        "tenant": "acme",
        "ordering_key": "k",
    }
    ours, theirs = Event(**kwargs), Event(**kwargs)

    sql.insert_row(ours)
    theirs.save(force_insert=True)

    assert ours._state.adding is False
    assert ours._state.db == "default"
    # created_at is the database's (db_default), read back into the row as save() does.
    assert ours.created_at == Event.objects.get(pk=ours.pk).created_at
    fields = [
        f.attname for f in Event._meta.concrete_fields if f.attname not in ("id", "created_at")
    ]
    stored = Event.objects.values(*fields)
    assert stored.get(pk=ours.pk) == stored.get(pk=theirs.pk)
    with pytest.raises(IntegrityError), transaction.atomic():
        sql.insert_row(ours)  # the same id again


def test_insert_rows_reads_auto_ids_back_and_takes_now_as_the_database_s_clock() -> None:
    from datetime import timedelta

    from django.db.models.functions import Now
    from django.utils import timezone

    from deliveries.models import Delivery, Event
    from tests.fixtures import new_endpoint

    one, two = (new_endpoint(f"http://127.0.0.1:9/{n}") for n in range(2))
    event = Event.objects.create(type="order.created", occurred_at=timezone.now(), data={})
    later = timezone.now() + timedelta(hours=1)
    rows = [
        Delivery(event=event, endpoint=one, next_attempt_at=Now()),
        Delivery(event=event, endpoint=two, next_attempt_at=later, last_error="x"),
    ]
    with transaction.atomic():
        started = timezone.now()
        sql.insert_rows(rows)

    stored = {d.pk: d for d in Delivery.objects.all()}
    assert set(stored) == {rows[0].pk, rows[1].pk}, "each row got its id back"
    due = stored[rows[0].pk].next_attempt_at
    assert due is not None
    assert started - timedelta(seconds=5) <= due < later, "the database's clock at the insert"
    assert stored[rows[1].pk].next_attempt_at == later
    assert stored[rows[1].pk].last_error == "x"
    assert stored[rows[0].pk].created_at is not None, "auto_now_add, as a save sets it"


def test_insert_with_writes_a_row_and_its_rows_in_one_statement_or_neither() -> None:
    from django.db import IntegrityError
    from django.db.models.functions import Now
    from django.utils import timezone

    from deliveries.models import Delivery, Event
    from tests.fixtures import new_endpoint

    one, two = (new_endpoint(f"http://127.0.0.1:9/{n}") for n in range(2))
    event = Event(type="order.created", occurred_at=timezone.now(), data={"n": 1})
    rows = [Delivery(event=event, endpoint=e, next_attempt_at=Now()) for e in (one, two)]
    seen: list[str] = []

    def noted(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "pg_class" not in sql:
            seen.append(sql.split()[0])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(noted):
        sql.insert_with(event, rows)

    assert seen == ["WITH"]
    assert event.created_at == Event.objects.get(pk=event.pk).created_at, "read back"
    stored = dict(Delivery.objects.filter(event=event).values_list("pk", "endpoint_id"))
    assert stored == {rows[0].pk: one.pk, rows[1].pk: two.pk}, "each row its own id back"

    # A row that fails (here: a second delivery to one endpoint) takes the other with it.
    again = Event(type="order.created", occurred_at=timezone.now(), data={})
    clash = [Delivery(event=again, endpoint=one, next_attempt_at=Now()) for _ in range(2)]
    with pytest.raises(IntegrityError), transaction.atomic():
        sql.insert_with(again, clash)
    assert not Event.objects.filter(pk=again.pk).exists()

    alone = Event(type="order.created", occurred_at=timezone.now(), data={})
    sql.insert_with(alone, [])
    assert Event.objects.filter(pk=alone.pk).exists()


def test_insert_rows_refuses_rows_it_cannot_write_as_a_save_would() -> None:
    from django.db.models import F
    from django.db.models.functions import Now
    from django.utils import timezone

    from deliveries.models import Delivery, Event
    from tests.fixtures import new_endpoint

    endpoint = new_endpoint("http://127.0.0.1:9/hook")
    event = Event.objects.create(type="order.created", occurred_at=timezone.now(), data={})

    def delivery(**fields: Any) -> Delivery:
        return Delivery(event=event, endpoint=endpoint, next_attempt_at=Now(), **fields)

    with pytest.raises(ValueError, match="same columns"):
        sql.insert_rows([delivery(), delivery(id=10**9)])  # an id, then none
    with pytest.raises(ValueError, match="expression"):
        sql.insert_rows([delivery(attempts=F("attempts") + 1)])
    assert not Delivery.objects.exists()
