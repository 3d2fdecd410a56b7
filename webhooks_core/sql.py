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
"""

import contextlib
from collections.abc import Iterator
from typing import Any

from django.db import connection


@contextlib.contextmanager
def sql_cursor() -> Iterator[Any]:
    """A cursor of the default connection, used as `connection.cursor()` is (wrapped by
    Django: its errors and its execute wrappers apply); on PostgreSQL with psycopg 3 it
    binds its parameters on the server (see the module)."""
    if connection.vendor != "postgresql" or not _psycopg3() or connection.queries_logged:
        # Where queries are logged (DEBUG, a test capturing them), Django's own cursor:
        # its log shows each statement with its values, which a prepared one lacks.
        with connection.cursor() as cursor:
            yield cursor
        return
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    # Typed Any: django-stubs declare the wrapper's argument as a wrapper, where Django
    # passes (and wraps) the driver's own cursor.
    raw: Any = _preparing_cursor_class()(connection.connection)
    with connection.make_cursor(raw) as cursor:
        yield cursor


def _psycopg3() -> bool:
    from django.db.backends.postgresql import psycopg_any

    return bool(psycopg_any.is_psycopg3)


_PREPARING_CURSOR: Any = None


def _preparing_cursor_class() -> Any:
    """psycopg's server-binding cursor, asking to prepare every statement it runs (psycopg
    prepares nothing where the connection's `prepare_threshold` is None). Not left to
    the threshold: psycopg counts every statement the connection runs, the ORM's too, in
    a short list, so ours could be pushed out of it before their count came up."""
    global _PREPARING_CURSOR
    if _PREPARING_CURSOR is None:
        import psycopg

        class PreparingCursor(psycopg.Cursor[Any]):
            def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
                options.setdefault("prepare", True)
                return super().execute(query, params, **options)

        _PREPARING_CURSOR = PreparingCursor
    return _PREPARING_CURSOR
