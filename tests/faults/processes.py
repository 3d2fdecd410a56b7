"""Processes a fault test starts: the driver (tests/faults/driver.py) and a gunicorn web
process, each pointed at the servers the test chooses through its environment."""

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

from bench.common import procfile_web_command
from tests.conftest import wait_until
from tests.fixtures import free_port
from tests.helpers import stop_process, worker_process

DRIVER = [sys.executable, "-m", "tests.faults.driver"]


def _env(extra_env: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra_env}


def run_driver(args: list[str], extra_env: dict[str, str], timeout: float = 120) -> Any:
    """Runs one driver command to its end and returns what it printed (JSON)."""
    done = subprocess.run(
        DRIVER + args, env=_env(extra_env), capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise DriverFailed(done.returncode, done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


class DriverFailed(Exception):
    def __init__(self, returncode: int, stderr: str) -> None:
        super().__init__(f"driver exited {returncode}: {stderr[-2000:]}")
        self.returncode = returncode
        self.stderr = stderr


@contextlib.contextmanager
def driver_running(args: list[str], extra_env: dict[str, str]) -> Iterator[None]:
    process = subprocess.Popen(DRIVER + args, env=_env(extra_env))
    try:
        yield
    finally:
        stop_process(process)


@contextlib.contextmanager
def web_process(env: dict[str, str], threads: int = 4) -> Iterator[str]:
    """gunicorn serving the project, as the Procfile's `web`; yields its base URL."""
    port = free_port()
    command = [sys.executable, "-m", "gunicorn", "webhooks_project.wsgi"]
    command += [
        "-b",
        f"127.0.0.1:{port}",
        "-w",
        "1",
        "--threads",
        str(threads),
        "--log-level",
        "warning",
    ]
    process = subprocess.Popen(command, env={**os.environ, **env})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{base}/healthz"), timeout=30, what="gunicorn to answer")
        yield base
    finally:
        process.terminate()
        process.wait(timeout=20)


def _answers(url: str) -> bool:
    with contextlib.suppress(requests.RequestException):
        return requests.get(url, timeout=1).status_code == 200
    return False


ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def procfile_web(env: dict[str, str]) -> Iterator[str]:
    """The `web` process exactly as the Procfile starts it, on a free loopback port;
    yields its base URL. (`web_process` above is a one-worker gthread stand-in.)"""
    port = free_port()
    bin_dir = str(Path(sys.executable).parent)
    full_env = {**os.environ, **env, "PORT": str(port)}
    full_env["PATH"] = f"{bin_dir}:{full_env.get('PATH', '')}"
    full_env.pop("WEB_CONCURRENCY", None)  # the Procfile's default, as in production
    # Through sh as honcho runs it, so ${PORT:-8000} and the like expand the same way.
    process = subprocess.Popen(
        ["sh", "-c", "exec " + procfile_web_command()],
        env=full_env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{base}/healthz"), timeout=60, what="the web process")
        yield base
    finally:
        stop_process(process)


@contextlib.contextmanager
def supervised_worker(extra_env: dict[str, str]) -> Iterator[list[int | None]]:
    """A `celery worker` process started again whenever it exits, as a process supervisor
    does in production (systemd `Restart=always`, compose `restart: unless-stopped`).

    Yields the exit codes of the workers that died, so a test can tell that one did.
    """
    exits: list[int | None] = []
    stopping = threading.Event()

    def supervise() -> None:
        while not stopping.is_set():
            with worker_process(extra_env) as worker:
                while worker.poll() is None and not stopping.wait(0.2):
                    pass
                if not stopping.is_set():
                    exits.append(worker.returncode)

    supervisor = threading.Thread(target=supervise, daemon=True)
    supervisor.start()
    try:
        yield exits
    finally:
        stopping.set()
        supervisor.join()
