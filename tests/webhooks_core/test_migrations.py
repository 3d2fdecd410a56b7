"""Each app's migrations from an empty database, driven with ``manage.py migrate`` on a
database of its own: API tokens and the audit log are ``webhooks_core``'s tables, a host
that only received and then adds the sending side ends with one set of them, and the
operator groups exist on a fresh install."""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def database() -> Iterator[str]:
    name = f"{settings.DATABASES['default']['NAME']}_move"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate(database: str, *args: str, settings_module: str = "webhooks_project.settings") -> None:
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{database}",
        "DJANGO_SETTINGS_MODULE": settings_module,
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "--skip-checks", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]


def query(database: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{database}") as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def tables(database: str) -> set[str]:
    rows = query(database, "SELECT tablename FROM pg_tables")
    return {row[0] for row in rows} & {
        "deliveries_apitoken",
        "deliveries_auditentry",
        "webhooks_core_apitoken",
        "webhooks_core_auditentry",
    }


def token_key_target(database: str) -> str:
    (row,) = query(
        database,
        "SELECT confrelid::regclass::text FROM pg_constraint "
        "WHERE conrelid = 'deliveries_portallink'::regclass AND contype = 'f'",
    )
    return str(row[0])


def test_a_fresh_install_has_the_core_tables_only(database: str) -> None:
    migrate(database)
    assert tables(database) == {"webhooks_core_apitoken", "webhooks_core_auditentry"}
    assert token_key_target(database) == "webhooks_core_apitoken"
    groups = query(database, "SELECT name FROM auth_group ORDER BY name")
    assert groups == [("operators",), ("viewers",)]


def test_adding_the_sending_side_to_a_receiving_host_leaves_one_set_of_tables(
    database: str,
) -> None:
    migrate(database, settings_module="tests.webhooks_core.hosts.receiving_only")
    assert tables(database) == {"webhooks_core_apitoken", "webhooks_core_auditentry"}
    assert not query(database, "SELECT 1 FROM pg_tables WHERE tablename LIKE 'deliveries_%%'")
    query(
        database,
        "INSERT INTO webhooks_core_apitoken (name, token_hash, token_prefix, created_at) "
        "VALUES ('ops', %s, 'whk_abc', now())",
        "a" * 64,
    )

    migrate(database)  # now with deliveries

    assert tables(database) == {"webhooks_core_apitoken", "webhooks_core_auditentry"}
    assert token_key_target(database) == "webhooks_core_apitoken"
    assert query(database, "SELECT name FROM webhooks_core_apitoken") == [("ops",)]


def test_a_host_without_webhooks_core_is_told_to_add_it() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.webhooks_core.hosts.without_core"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert 'Add "webhooks_core" to INSTALLED_APPS' in result.stderr
