"""A cursor for the SQL we write ourselves on hot paths, which PostgreSQL may prepare.

Django's psycopg 3 cursors bind parameters on the client: every statement reaches
PostgreSQL as new text, to be parsed and planned again (for an owner's round claim, half a
millisecond of planning on each run). Our own statements on hot paths (an owner's lease,
its claim, its look, a fan-out's mark) are few and fixed, so `sql_cursor()` runs them on a
cursor that binds its parameters on the server and asks psycopg to prepare each on its
first run: parsed and planned once per connection.

Preparing follows the host's `DATABASES[...]["OPTIONS"]["prepare_threshold"]`, psycopg's
own switch, which Django passes to the connection: unset (Django's default), nothing is
prepared, as behind a transaction-mode PgBouncer older than 1.21, which cannot keep
prepared statements; any number, ours are prepared on first use. (Django's own cursors
bind on the client and never prepare, unless the host turns `server_side_binding` on.)

A statement is prepared only once PostgreSQL has statistics of every table it reads
(`tables`): the plan PostgreSQL keeps for a prepared statement is made for the tables as
it then sees them and kept until their statistics change. Made on a table never analysed
(a new installation's first minute, before autovacuum's first look), it stays a plan for a
table of a few rows, sequential scans and sorts of everything, while the table grows to
thousands of rows (an owner's claim became several times slower). Until then the statement
is bound on the server but planned on each run, for the table as it is.

Where Django keeps times in UTC (`USE_TZ`), these cursors read `timestamptz` columns
with psycopg's own loader (its C one, with `psycopg[binary]`): Django's wraps psycopg's
pure-Python one, several times slower a value, and a round's claim reads seven per
row. Both give the same instant, aware, in the session's
zone (UTC, as Django sets it).
"""

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.models.expressions import BaseExpression, DatabaseDefault
from django.db.models.functions import Now

T = TypeVar("T")
logger = logging.getLogger(__name__)

# How often the statistics of tables not yet analysed are asked for again.
STATISTICS_RECHECK_SECONDS = 5.0


@contextlib.contextmanager
def sql_cursor(tables: Sequence[str] = ()) -> Iterator[Any]:
    """A cursor of the default connection, used as `connection.cursor()` is (wrapped by
    Django: its errors and its execute wrappers apply); on PostgreSQL with psycopg 3 it
    binds its parameters on the server and prepares its statements once each of `tables`
    (those they read) has statistics (see the module)."""
    # The connection itself, looked up once: each use of Django's `connection` proxy
    # looks it up again (in a context-local store, costly under gevent).
    db = connections[DEFAULT_DB_ALIAS]
    if db.vendor != "postgresql" or not _psycopg3() or db.queries_logged:
        # Where queries are logged (DEBUG, a test capturing them), Django's own cursor:
        # its log shows each statement with its values, which a prepared one lacks.
        with db.cursor() as cursor:
            yield cursor
        return
    db.close_if_health_check_failed()
    db.ensure_connection()
    db.validate_thread_sharing()
    # Typed Any: django-stubs declare the wrapper's argument as a wrapper, where Django
    # passes (and wraps) the driver's own cursor.
    raw: Any = _cursor_class(_analysed(db, tables))(db.connection)
    with db.make_cursor(raw) as cursor:
        yield cursor


def _psycopg3() -> bool:
    from django.db.backends.postgresql import psycopg_any

    return bool(psycopg_any.is_psycopg3)


# (database name, table) that PostgreSQL has statistics of: once analysed, a table keeps
# them (autovacuum renews them as it changes, and the plans kept with them are made anew).
_ANALYSED: set[tuple[str, str]] = set()
# When the tables not yet analysed were last asked about (monotonic), per database.
_ASKED_AT: dict[str, float] = {}
_LOCK = threading.Lock()


def _analysed(db: Any, tables: Sequence[str]) -> bool:
    """Whether PostgreSQL has statistics of every one of `tables` (asked at most every
    `STATISTICS_RECHECK_SECONDS` while one has none)."""
    database = str(db.settings_dict["NAME"])
    missing = [table for table in tables if (database, table) not in _ANALYSED]
    if not missing:
        return True
    now = time.monotonic()
    with _LOCK:
        if now - _ASKED_AT.get(database, -STATISTICS_RECHECK_SECONDS) < STATISTICS_RECHECK_SECONDS:
            return False
        _ASKED_AT[database] = now
    # (reltuples is -1 until the table's first ANALYZE or VACUUM: PostgreSQL 14 and later.)
    with db.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relname = ANY(%s) AND reltuples >= 0 "
            "AND pg_table_is_visible(oid)",
            [missing],
        )
        found = {row[0] for row in cursor.fetchall()}
    _ANALYSED.update((database, table) for table in found)
    return found.issuperset(missing)


_CURSOR_CLASSES: dict[bool, Any] = {}


def _cursor_class(prepare: bool) -> Any:
    """psycopg's server-binding cursor, asking to prepare every statement it runs, or none
    (psycopg prepares nothing where the connection's `prepare_threshold` is None). Not left
    to the threshold: psycopg counts every statement the connection runs, the ORM's too, in
    a short list, so ours could be pushed out of it before their count came up (and, not to
    be prepared yet, would be after five runs)."""
    if prepare not in _CURSOR_CLASSES:
        import psycopg
        from django.conf import settings
        from psycopg.types.datetime import TimestamptzLoader

        class ServerBindingCursor(psycopg.Cursor[Any]):
            def __init__(self, connection: Any, **kwargs: Any) -> None:
                super().__init__(connection, **kwargs)
                if settings.USE_TZ:
                    # (psycopg swaps in its C loader where it has one.)
                    self.adapters.register_loader("timestamptz", TimestamptzLoader)

            def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
                options.setdefault("prepare", prepare)
                return super().execute(query, params, **options)

        _CURSOR_CLASSES[prepare] = ServerBindingCursor
    return _CURSOR_CLASSES[prepare]


def aborted_by_a_concurrent_write(exc: BaseException) -> bool:
    """Whether the database aborted a transaction for a deadlock or a serialization
    failure (PostgreSQL's 40P01, 40001): the same work tried again in a new transaction
    may succeed."""
    return getattr(exc.__cause__, "sqlstate", None) in ("40P01", "40001")


def tried_again(
    work: Callable[[], T], *, tries: int, when: Callable[[DatabaseError], bool], what: str = ""
) -> T:
    """`work()`, run again (`tries` runs in all) while it fails with an error `when`
    accepts (a concurrent write got in its way); never inside a transaction of the
    caller's, whose aborted state a second run would inherit."""
    for tries_left in range(tries - 1, -1, -1):
        try:
            return work()
        except DatabaseError as exc:
            if tries_left == 0 or not when(exc) or connections[DEFAULT_DB_ALIAS].in_atomic_block:
                raise
            if what:
                logger.info("%s met a concurrent write; trying again", what)
    raise AssertionError("unreachable")


def insert_row(row: Any) -> None:
    """`insert_rows([row])`."""
    insert_rows([row])


def insert_rows(rows: Sequence[Any]) -> None:
    """Insert new instances of one model as `save(force_insert=True)` would each, without
    model signals, in one statement of ours (`sql_cursor`: prepared on PostgreSQL).

    Built from the model's metadata, so a new column cannot be forgotten; a column left to
    the database's default (`db_default`) and an auto id are read back into the rows, as
    Django does; a value of `Now()` is the database's clock, as in a save. For rows written
    on hot paths, where Django's compiling of the INSERT costs more than the INSERT;
    elsewhere (another database than PostgreSQL) it is the ORM's `bulk_create`."""
    if not rows:
        return
    db = connections[DEFAULT_DB_ALIAS]
    if db.vendor != "postgresql":
        type(rows[0])._default_manager.bulk_create(rows)
        return
    insert = _Insert.of(rows, db)
    with sql_cursor([insert.table]) as cursor:
        cursor.execute(insert.sql + _returning(insert.returning), insert.params)
        returned = cursor.fetchall() if insert.returning else [()] * len(rows)
    for row, values in zip(rows, returned, strict=True):
        _stored(row, insert.returning, values, db)


def insert_with(parent: Any, rows: Sequence[Any]) -> None:
    """Insert a new row and new rows that refer to it (`insert_rows`), together: on
    PostgreSQL one statement (atomic on its own, no transaction to open and commit),
    elsewhere one transaction."""
    db = connections[DEFAULT_DB_ALIAS]
    if not rows:
        insert_row(parent)
        return
    if db.vendor != "postgresql":
        from django.db import transaction

        with transaction.atomic():  # (no model signals here either)
            type(parent)._default_manager.bulk_create([parent])
            type(rows[0])._default_manager.bulk_create(rows)
        return
    first, then = _Insert.of([parent], db), _Insert.of(rows, db)
    # The parent's own returned columns come back with each of the others' rows.
    back = [f"(SELECT {_quote(f.column)} FROM parent)" for f in first.returning]  # noqa: S608
    sql = f"WITH parent AS ({first.sql}{_returning(first.returning)}) {then.sql}"
    if then.returning or back:
        sql += " RETURNING " + ", ".join([*(_quote(f.column) for f in then.returning), *back])
    with sql_cursor([first.table, then.table]) as cursor:
        cursor.execute(sql, [*first.params, *then.params])
        returned = cursor.fetchall() if then.returning or back else [()] * len(rows)
    count = len(then.returning)
    for row, values in zip(rows, returned, strict=True):
        _stored(row, then.returning, values[:count], db)
    _stored(parent, first.returning, returned[0][count:] if back else (), db)


@dataclass(frozen=True)
class _Insert:
    """The INSERT of some new rows of one model (no RETURNING), its parameters, and the
    fields the database fills."""

    table: str
    sql: str
    params: list[Any]
    returning: list[Any]

    @classmethod
    def of(cls, rows: Sequence[Any], db: Any) -> "_Insert":
        """Rows of one model alike: the same columns left to the database (an auto id, a
        `db_default`); of expressions, only `Now()`. Anything else is refused."""
        model: Any = type(rows[0])
        meta = model._meta
        if meta.parents or any(type(row) is not model for row in rows):
            raise ValueError(f"insert_rows takes new rows of one model without parents: {model}")
        written, maybe_left = _columns(model)

        def left_to_database(row: Any) -> list[Any]:
            return [
                field
                for field in maybe_left
                if (field.primary_key and getattr(row, field.attname) is None)
                or isinstance(getattr(row, field.attname), DatabaseDefault)
            ]

        left = left_to_database(rows[0])
        fields = [field for field in written if field not in left]
        shapes, params = [], []
        for row in rows:
            if left_to_database(row) != left:
                raise ValueError("insert_rows takes rows that leave the same columns unset")
            shape = []
            for field in fields:
                value = field.pre_save(row, True)
                if isinstance(value, Now):
                    shape.append(True)
                elif isinstance(value, BaseExpression):
                    raise ValueError(f"insert_rows takes no expression but Now(): {value!r}")
                else:
                    shape.append(False)
                    params.append(field.get_db_prep_save(value, db))
            shapes.append(tuple(shape))
        columns = tuple(str(field.column) for field in fields)
        sql = _insert_sql(meta.db_table, columns, tuple(shapes))
        return cls(meta.db_table, sql, params, list(meta.db_returning_fields))


@functools.cache
def _columns(model: Any) -> tuple[list[Any], list[Any]]:
    """A model's columns an INSERT may write, and those of them it may leave to the
    database (its primary key, those with a `db_default`)."""
    written = [field for field in model._meta.local_concrete_fields if not field.generated]
    return written, [field for field in written if field.primary_key or field.has_db_default()]


def _stored(row: Any, fields: Sequence[Any], values: Sequence[Any], db: Any) -> None:
    """The row as a save leaves it: what the database filled in, and no longer new."""
    for field, value in zip(fields, values, strict=True):
        setattr(row, field.attname, value)
    row._state.adding = False
    row._state.db = db.alias


def _quote(name: str) -> str:
    """A name quoted as PostgreSQL's backend quotes it."""
    return name if name.startswith('"') and name.endswith('"') else f'"{name}"'


def _returning(fields: Sequence[Any]) -> str:
    return " RETURNING " + ", ".join(_quote(field.column) for field in fields) if fields else ""


@functools.lru_cache(maxsize=128)
def _insert_sql(table: str, columns: tuple[str, ...], shapes: tuple[tuple[bool, ...], ...]) -> str:
    """The INSERT of len(shapes) rows, each a placeholder per column or, where its shape
    says so, the database's clock (what Django's `Now()` is on PostgreSQL)."""
    values = ", ".join(
        "(" + ", ".join("STATEMENT_TIMESTAMP()" if now else "%s" for now in shape) + ")"
        for shape in shapes
    )
    return (
        f"INSERT INTO {_quote(table)} ({', '.join(map(_quote, columns))}) "  # noqa: S608 (names)
        f"VALUES {values}"
    )
