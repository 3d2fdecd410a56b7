"""`make run`'s first run prints the admin's generated password, even into a file.

Redirected to a file or a pipe, stdout is block-buffered: a line written before the
server starts serving stayed in the buffer for as long as the process ran, so someone who
sent `make run` to a log file never saw the password. The test runs `manage.py serve`
exactly so, on its own SQLite database and the in-process broker, and reads the file while
the server is still running.
"""

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from tests.conftest import wait_until
from tests.helpers import stop_process

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = re.compile(r"user 'admin', password '([^']+)' \(generated")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_generated_password_reaches_a_redirected_stdout(tmp_path: Path) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_SUPERUSER_", "PYTHONUNBUFFERED"))
    }
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        CELERY_BROKER_URL="memory://",
        DEBUG="true",
        WEBHOOKS_HEALTH_REDIS_URL="",
    )
    port = free_port()
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--no-demo", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.DEVNULL,
        )
    try:
        wait_until(
            lambda: PASSWORD.search(log.read_text()) or process.poll() is not None,
            timeout=90,
            what="the generated password in the redirected output",
        )
        assert process.poll() is None, "serve exited early"
        match = PASSWORD.search(log.read_text())
        assert match is not None
        assert len(match.group(1)) >= 12
        assert "changepassword admin" in log.read_text()
    finally:
        stop_process(process)
