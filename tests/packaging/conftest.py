import os
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis
from django.conf import settings

from tests.packaging.host import REPO, run, uv
from tests.services import missing


@pytest.fixture(scope="session")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel built from this checkout (once per run:
    every host test installs the same distribution)."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    uv_path = uv()
    if uv_path is None:
        missing("uv (bin/setup installs it into .tools/)")
    dist = tmp_path / "dist"
    run(uv_path, "build", "--wheel", "--offline", "--out-dir", dist, cwd=REPO)
    (wheel,) = dist.glob("django_reliable_webhooks-*.whl")
    env_dir = tmp_path / "venv"
    run(uv_path, "venv", "--offline", "--python", sys.executable, env_dir)
    python = env_dir / "bin" / "python"
    # The locked versions of what the distribution needs (nothing of the dev or deploy
    # groups), from the lock file as bin/setup installs them: their wheels are in the cache.
    run(
        uv_path, "sync", "--frozen", "--offline", "--no-default-groups", "--extra", "postgres",
        "--no-install-project", cwd=REPO,
        env={**os.environ, "UV_PROJECT_ENVIRONMENT": str(env_dir), "UV_PYTHON_DOWNLOADS": "never"},
    )  # fmt: skip
    run(uv_path, "pip", "install", "--offline", "--no-deps", "--python", python, wheel)
    # The wheel's own requirements are met by what was installed.
    run(uv_path, "pip", "check", "--python", python)
    return python


@pytest.fixture
def host_database() -> Iterator[str]:
    name = f"{settings.DATABASES['default']['NAME']}_host"
    admin_url = "postgresql://postgres@127.0.0.1:5432/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def clean_broker() -> Iterator[str]:
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.flushdb()
    yield settings.CELERY_BROKER_URL
    client.flushdb()
