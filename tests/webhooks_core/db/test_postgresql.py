"""`webhooks_core.db.postgresql`: a pooled connection is checked by its socket, and one
the server has closed is never handed out (real PostgreSQL, a pool of our own)."""

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection
from psycopg_pool import ConnectionPool

from tests.conftest import wait_until
from webhooks_core.db.postgresql import base as backend
from webhooks_core.db.postgresql.base import DatabaseWrapper, sound

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pooled() -> Iterator[DatabaseWrapper]:
    settings = {
        **connection.settings_dict,
        "ENGINE": "webhooks_core.db.postgresql",
        "CONN_MAX_AGE": 0,
        "CONN_HEALTH_CHECKS": False,
        "OPTIONS": {
            **connection.settings_dict.get("OPTIONS", {}),
            "pool": {"min_size": 2, "max_size": 2, "timeout": 10},
        },
    }
    wrapper = DatabaseWrapper(settings, alias="pool_check_test")
    try:
        yield wrapper
    finally:
        wrapper.close()
        wrapper.close_pool()


def _backend_pid(wrapper: DatabaseWrapper) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def _terminate(pids: set[int]) -> None:
    """End these backends, and wait (up to 5 s each) until they have exited, so that
    their clients' sockets have the server's goodbye to read."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM unnest(%s::int[]) AS pid", [list(pids)]
        )


def _idle_pids(wrapper: DatabaseWrapper) -> set[int]:
    """The backends of the pool's connections (each taken once, then given back)."""
    pool: Any = wrapper.pool
    pool.open()
    taken = [pool.getconn() for _ in range(pool.max_size)]
    pids = {conn.info.backend_pid for conn in taken}
    for conn in taken:
        pool.putconn(conn)
    return pids


def test_an_idle_connection_is_sound_without_a_query(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_query(conn: Any) -> None:
        raise AssertionError("a round trip to check an idle connection")

    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(no_query))
    with psycopg.connect(**_params()) as conn:
        conn.autocommit = True
        assert sound(conn)


def test_a_connection_the_server_closed_is_not_sound() -> None:
    conn = psycopg.connect(**_params(), autocommit=True)
    try:
        _terminate({conn.info.backend_pid})
        wait_until(lambda: not sound(conn), timeout=10, what="the closed connection to be found")
    finally:
        conn.close()


def test_a_pool_whose_connections_were_all_closed_hands_out_a_working_one(
    pooled: DatabaseWrapper,
) -> None:
    first = _backend_pid(pooled)
    pooled.close()  # given back to the pool
    closed = _idle_pids(pooled)
    assert first in closed
    _terminate(closed)

    # Without the check, the first query on a closed connection would fail.
    assert _backend_pid(pooled) not in closed
    pooled.close()
    assert _backend_pid(pooled) not in closed


def test_the_check_by_query_is_left_to_django_when_health_checks_are_on(
    pooled: DatabaseWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    def not_ours(conn: Any) -> bool:
        raise AssertionError("the socket check ran with CONN_HEALTH_CHECKS on")

    monkeypatch.setattr(backend, "sound", not_ours)
    pooled.settings_dict["CONN_HEALTH_CHECKS"] = True
    pooled.close_pool()  # made again with Django's check
    closed = _idle_pids(pooled)
    _terminate(closed)
    assert _backend_pid(pooled) not in closed  # Django's query found them closed


def test_a_check_interrupted_gives_the_connection_back_to_the_pool(
    pooled: DatabaseWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Stop(BaseException):
        pass

    def interrupted(conn: Any) -> bool:
        raise Stop  # as a time limit or a kill would, in the check's query

    pool: Any = pooled.pool
    pool.open()
    monkeypatch.setattr(backend, "sound", interrupted)
    for _ in range(pool.max_size + 1):  # more than the pool holds
        with pytest.raises(Stop):
            pooled.ensure_connection()
    wait_until(
        lambda: pool.get_stats()["pool_available"] == pool.max_size,
        timeout=10,
        what="every connection back in the pool",
    )


def _params() -> dict[str, Any]:
    settings = connection.settings_dict
    return {
        "dbname": settings["NAME"],
        "user": settings["USER"] or None,
        "host": settings["HOST"] or None,
        "port": settings["PORT"] or None,
        "password": settings["PASSWORD"] or None,
    }
