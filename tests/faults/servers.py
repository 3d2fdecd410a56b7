"""Private Redis and PostgreSQL servers that a fault test may kill and restart.

The shared servers on 6379 and 5432 carry the other engineers' test runs, so a scenario
that takes a server down starts its own, on a port of its own, and never touches theirs.
"""

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import redis

from tests.services import postgres_bindir, require_binary

START_TIMEOUT_SECONDS = 30.0


def _wait_for(check: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while True:
        with contextlib.suppress(Exception):
            if check():
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer within {START_TIMEOUT_SECONDS}s")
        time.sleep(0.1)


class PrivateRedis:
    """A redis-server without persistence: killing it loses every message, as in
    production where Redis runs without persistence (DESIGN.md, invariant 2)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [require_binary("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no"]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        _wait_for(client.ping, f"redis on port {self.port}")
        client.close()

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process = None

    @classmethod
    @contextlib.contextmanager
    def running(cls, port: int) -> Iterator["PrivateRedis"]:
        server = cls(port)
        server.start()
        try:
            yield server
        finally:
            server.kill()


class PrivatePostgres:
    """A throwaway PostgreSQL cluster (trust auth, fsync off) in a temporary directory.

    `stop()` is an immediate shutdown (what a crash looks like to clients); `start()`
    brings the same data back.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.bindir = postgres_bindir()
        self.directory = Path(tempfile.mkdtemp(prefix=f"faults-pg{port}-"))
        self.data = self.directory / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *command: str) -> None:
        # PostgreSQL refuses to run as root; the cluster then belongs to `postgres`.
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run(prefix + list(command), check=True, capture_output=True)

    def init(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.directory, user="postgres")
        self._run(
            str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
            "--no-sync",
        )  # fmt: skip

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1"
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", options,
            "-l", str(self.directory / "server.log"), "-w", "start",
        )  # fmt: skip
        _wait_for(self._answers, f"PostgreSQL on port {self.port}")

    def _answers(self) -> bool:
        with psycopg.connect(self.url(), connect_timeout=2):
            return True

    def stop(self) -> None:
        self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"
        )

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    @classmethod
    @contextlib.contextmanager
    def running(cls, port: int) -> Iterator["PrivatePostgres"]:
        server = cls(port)
        try:
            server.init()
            server.start()
            yield server
        finally:
            with contextlib.suppress(subprocess.CalledProcessError):
                server.stop()
            shutil.rmtree(server.directory, ignore_errors=True)
