"""What the suite needs beyond PostgreSQL and Redis on 127.0.0.1, and how a test says so.

Outside CI a test whose service or binary is absent skips with one line naming it (a
newcomer runs `make test` without RabbitMQ); with `CI` set (.ci/run sets it) the same test
fails, so a missing service never passes for a green run.
"""

import glob
import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


# name -> (probe, what to install or start); the marker `needs("rabbitmq")` names them.
SERVICES = {
    "rabbitmq": (lambda: _answers(5672), "RabbitMQ on 127.0.0.1:5672 (guest/guest)"),
    "nats": (lambda: _answers(4222), "NATS with JetStream on 127.0.0.1:4222"),
}


def missing(what: str) -> NoReturn:
    """Skips the running test (fails it under CI) because `what` is absent."""
    message = f"needs {what}, which is absent"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set, so this is a failure)", pytrace=False)
    pytest.skip(message)


def require_services(*names: str) -> None:
    for name in names:
        probe, what = SERVICES[name]
        if not probe():
            missing(what)


def require_binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        missing(f"the `{name}` binary on PATH")
    return found


def postgres_bindir() -> Path:
    """Where this machine's PostgreSQL server binaries (initdb, pg_ctl) are: `pg_config
    --bindir` when it names them, else the newest /usr/lib/postgresql/<version>/bin."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        result = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if result.returncode == 0:
            candidates.append(Path(result.stdout.strip()))
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += sorted(
        (Path(p) for p in versions), key=lambda p: int(p.parent.name), reverse=True
    )
    for directory in candidates:
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    missing("PostgreSQL's server binaries (initdb, pg_ctl: `pg_config --bindir`)")
