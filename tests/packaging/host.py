"""What the packaging tests share: building commands, waiting, a host's database."""

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

REPO = Path(__file__).resolve().parents[2]
QUEUES = "webhooks.fanout,webhooks.delivery,webhooks.inbox,webhooks.maintenance"
STEP_TIMEOUT = 180
WAIT_SECONDS = 60.0

CELERY_PY = """
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "host.settings")

app = Celery("host")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
"""

INIT_PY = """
from .celery import app as celery_app

__all__ = ("celery_app",)
"""


def uv() -> str | None:
    found = shutil.which("uv")
    local = REPO / ".tools" / "bin" / "uv"
    return found or (str(local) if local.exists() else None)


def run(*command: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, command))} failed ({result.returncode}):\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result.stdout


def wait_until(check: Callable[[], Any], what: str, timeout: float = WAIT_SECONDS) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def query(database: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{database}") as conn:
        return conn.execute(sql, params).fetchall()


def database_settings(name: str) -> str:
    """A host's settings lines for the test run's PostgreSQL database `name`."""
    return f"""
DATABASES = {{
    "default": {{
        "ENGINE": "django.db.backends.postgresql",
        "NAME": {name!r},
        "USER": "postgres",
        "HOST": "127.0.0.1",
        "PORT": 5432,
    }}
}}
"""
