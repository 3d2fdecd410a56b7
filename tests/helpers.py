"""Helpers shared by the real-stack tests of both sides: a separate `celery worker` process
(so that a test can SIGKILL it) and a background sweeper standing in for Celery beat."""

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.db import connection

if TYPE_CHECKING:
    from uuid import UUID

    from deliveries.models import Event

from tests.conftest import ALL_QUEUES
from tests.fixtures import free_port
from webhooks_project.celery import app as celery_app


def declare_queues() -> None:
    """Declare the queues in the broker again, as a starting worker does.

    Kombu's Redis transport routes a message through binding keys stored in Redis, and a
    producer that declared them once does not declare them again. After a FLUSHDB a message
    sent before any worker starts would be routed nowhere; declaring the queues again makes
    it wait in its queue.
    """
    with celery_app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in celery_app.amqp.queues.values():
            queue.bind(channel).declare()


@contextlib.contextmanager
def sweeping_in_background(
    interval: float = 0.5, sweeps: Iterable[Callable[[], object]] | None = None
) -> Iterator[None]:
    """Runs the sweepers every `interval` seconds, as Celery beat does in production.

    By default the sending side's sweeper; pass ``sweeps`` for others (the inbox's).
    """
    if sweeps is None:
        from deliveries import services

        sweeps = [services.sweep]
    sweepers = list(sweeps)
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(interval):
                for sweep in sweepers:
                    sweep()
        finally:
            connection.close()

    sweeper = threading.Thread(target=beat, daemon=True)
    sweeper.start()
    try:
        yield
    finally:
        stop.set()
        sweeper.join()


def database_url() -> str:
    """The test database, for processes started by a test."""
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@contextlib.contextmanager
def worker_process(
    extra_env: dict[str, str], *, pool: str = "threads", concurrency: int = 4
) -> Iterator[subprocess.Popen[bytes]]:
    """A separate `celery worker` process on the test database and broker
    (``extra_env`` may point it elsewhere: DATABASE_URL, CELERY_BROKER_URL); `pool`
    "gevent" runs it as the Procfile's delivery worker does."""
    env = {**os.environ, "DATABASE_URL": database_url(), **extra_env}
    queues = ",".join(ALL_QUEUES)
    command = [sys.executable, "-m", "celery", "-A", "webhooks_project", "worker"]
    command += ["--pool", pool, "-c", str(concurrency), "-Q", queues, "-l", "WARNING"]
    command += ["--without-heartbeat", "--without-mingle", "--without-gossip"]
    process = subprocess.Popen(command, env=env)
    try:
        yield process
    finally:
        stop_process(process)


def stop_process(process: "subprocess.Popen[bytes]", grace_seconds: float = 20) -> None:
    """SIGTERM, and SIGKILL if it has not exited after the grace period."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def replay_one(event: "Event", endpoint_id: "UUID") -> None:
    """Send one delivered event to one endpoint again, the documented way (a replay)."""
    from datetime import timedelta

    from deliveries.services import ReplayFilters, replay_create

    replay_create(
        filters=ReplayFilters(
            since=event.created_at - timedelta(seconds=1),
            until=event.created_at + timedelta(seconds=1),
            event_types=[event.type],
            endpoint_ids=[endpoint_id],
        ),
        requested_via="tests",
    )


def call(
    url: str,
    token: str | None,
    method: str = "GET",
    body: Any = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 5,
) -> tuple[int, Any]:
    """One request to the host (only ever http://127.0.0.1): its status and its body,
    parsed when it is JSON."""
    sent = {"Content-Type": "application/json", **(headers or {})}
    if token:
        sent["Authorization"] = f"Bearer {token}"
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=sent, method=method)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            text = response.read().decode()
            status = int(response.status)
    except urllib.error.HTTPError as error:
        text, status = error.read().decode(), error.code
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def status_if_answering(url: str) -> int | None:
    """The status of a GET to a server on 127.0.0.1, or None while nothing listens."""
    try:
        return call(url, None)[0]
    except OSError:
        return None


def embedded_env(tmp_path: Path) -> dict[str, str]:
    """`make run`'s embedded default, on a SQLite file of its own and the in-process broker;
    DEBUG lets endpoints aim at loopback."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "PYTHONUNBUFFERED"))
    }
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        CELERY_BROKER_URL="memory://",
        DEBUG="true",
        WEBHOOKS_HEALTH_REDIS_URL="",
    )
    return env


def serve(
    env: dict[str, str], port: int, log: Path, *, demo: bool = False
) -> "subprocess.Popen[bytes]":
    """`manage.py serve` (what `make run` starts) from the checkout, its output to `log`."""
    command = [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}"]
    with log.open("wb") as out:
        return subprocess.Popen(
            command if demo else [*command, "--no-demo"],
            cwd=Path(__file__).resolve().parents[1],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


@contextlib.contextmanager
def procfile_web(tmp_path: Path, **env: str | None) -> Iterator[tuple[str, Path]]:
    """The Procfile's web line on a free port; yields its URL and its output file."""
    from bench.common import procfile_web_command
    from tests.conftest import wait_until

    port = free_port()
    full_env = {**os.environ, "DATABASE_URL": database_url(), "PORT": str(port)}
    full_env["PATH"] = f"{Path(sys.executable).parent}:{full_env.get('PATH', '')}"
    full_env.pop("WEB_CONCURRENCY", None)
    full_env["WEB_CONCURRENCY"] = "1"
    for key, value in env.items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    log = tmp_path / f"web-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["sh", "-c", "exec " + procfile_web_command()],
            env=full_env,
            cwd=Path(__file__).resolve().parents[1],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        import requests

        assert process.poll() is None, log.read_text()
        with contextlib.suppress(requests.RequestException):
            return requests.get(f"{base}/healthz", timeout=1).status_code == 200
        return False

    try:
        wait_until(answers, timeout=60, what="the web process")
        yield base, log
    finally:
        stop_process(process)


def read_until_closed(sock: socket.socket, stop: threading.Event) -> None:
    """Read and drop what the peer sends (so its writes never wait on us) until it closes
    the connection, the socket fails, or `stop` is set."""
    sock.settimeout(0.2)
    while not stop.is_set():
        try:
            if not sock.recv(65536):
                return
        except TimeoutError:
            continue
        except OSError:
            return
