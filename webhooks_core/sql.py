"""A cursor for the SQL we write ourselves on hot paths, which PostgreSQL may prepare.

Django's psycopg 3 cursors bind parameters on the client: every statement reaches
PostgreSQL as new text, to be parsed and planned again (for an owner's round claim, half a
millisecond of planning on each run). Our own statements on hot paths (an owner's lease,
its claim, its look, a fan-out's mark) are few and fixed, so `sql_cursor()` runs them on a
cursor that binds its parameters on the server, and psycopg prepares a statement once a
connection has run it `prepare_threshold` times: parsed and planned once per connection.

Preparing follows the host's `DATABASES[...]["OPTIONS"]["prepare_threshold"]`, psycopg's
own knob, which Django passes to the connection (unset: never prepare, as behind a
transaction-mode PgBouncer older than 1.21, which cannot keep prepared statements). The
ORM's statements are not affected either way: Django's cursors never prepare.
"""

import contextlib
from collections.abc import Iterator
from typing import Any

from django.db import connection


@contextlib.contextmanager
def sql_cursor() -> Iterator[Any]:
    """A cursor of the default connection, used as `connection.cursor()` is (wrapped by
    Django: its errors, its query log and its execute wrappers all apply); on
    PostgreSQL with psycopg 3 it binds its parameters on the server (see the module)."""
    if connection.vendor != "postgresql" or not _psycopg3():
        with connection.cursor() as cursor:
            yield cursor
        return
    import psycopg

    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    # Typed Any: django-stubs declare these wrappers' argument as a wrapper, where Django
    # passes (and wraps) the driver's own cursor.
    raw: Any = psycopg.Cursor(connection.connection)
    wrapped = (
        connection.make_debug_cursor(raw)
        if connection.queries_logged
        else connection.make_cursor(raw)
    )
    with wrapped as cursor:
        yield cursor


def _psycopg3() -> bool:
    from django.db.backends.postgresql import psycopg_any

    return bool(psycopg_any.is_psycopg3)
