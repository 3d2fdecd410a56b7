"""The peer, django-webhook 0.0.15 from PyPI, run beside us by `python -m bench --peer`.

It gets its own virtualenv (`.bench/peer-venv`, git-ignored; never the project's `.venv`),
its own PostgreSQL database (BENCH_PEER_DATABASE, default `<BENCH_DATABASE>_peer`) and
Redis database (BENCH_PEER_BROKER_URL, default the bench's, used only after our worker has
stopped), and the minimal project in `bench/peer_django_webhook/`. The bench process talks
to it through `bench.peer_django_webhook.drive`, one short-lived process per command.
"""

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.common import BENCH_DATABASE, BROKER_URL, POSTGRES_URL, ROOT, process

VENV = ROOT / ".bench" / "peer-venv"
REQUIREMENTS = [
    "django-webhook==0.0.15",
    "Django>=5.2,<6",
    "celery[redis]==5.*",
    "psycopg[binary]==3.*",
    "requests==2.*",
]
PEER_DATABASE = os.environ.get("BENCH_PEER_DATABASE", f"{BENCH_DATABASE}_peer")
PEER_BROKER_URL = os.environ.get("BENCH_PEER_BROKER_URL", BROKER_URL)
INSTALL_TIMEOUT_SECONDS = 600.0


class PeerUnavailable(Exception):
    """The peer could not be installed or started; the bench carries on without it."""


def ensure_venv() -> Path:
    """The peer's Python, installing it on first use (pip from PyPI; needs the network)."""
    python = VENV / "bin" / "python"
    marker = VENV / "requirements.txt"
    wanted = "\n".join(REQUIREMENTS) + "\n"
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    print(f"peer: installing {', '.join(REQUIREMENTS)} into {VENV}", flush=True)
    try:
        if not python.exists():
            subprocess.run(
                [sys.executable, "-m", "venv", str(VENV)],
                check=True,
                timeout=120,
                capture_output=True,
            )
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *REQUIREMENTS],
            check=True,
            timeout=INSTALL_TIMEOUT_SECONDS,
            capture_output=True,
            text=True,
        )
    except subprocess.CalledProcessError as error:
        tail = (error.stderr or error.stdout or "").strip().splitlines()[-3:]
        raise PeerUnavailable("pip failed: " + " | ".join(tail)) from error
    except (subprocess.TimeoutExpired, OSError) as error:
        raise PeerUnavailable(f"could not install: {error}") from error
    marker.write_text(wanted)
    return python


class PeerStack:
    def __init__(self, python: Path, retry_scale: float) -> None:
        self.python = python
        self.env = {
            "DJANGO_SETTINGS_MODULE": "bench.peer_django_webhook.settings",
            "PEER_DATABASE_URL": f"{POSTGRES_URL}/{PEER_DATABASE}",
            "PEER_BROKER_URL": PEER_BROKER_URL,
            "PEER_RETRY_SCALE": str(retry_scale),
            # Our bench variables must not leak into the peer's Django.
            "DATABASE_URL": "",
            "PYTHONPATH": str(ROOT),
        }

    def drive(self, *args: object, timeout: float = 600.0) -> dict[str, object]:
        command = [str(self.python), "-m", "bench.peer_django_webhook.drive", *map(str, args)]
        env = {**os.environ, **self.env}
        try:
            done = subprocess.run(
                command,
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as error:
            raise PeerUnavailable(f"peer command {args[0]} timed out after {timeout}s") from error
        if done.returncode != 0:
            tail = " | ".join(done.stderr.strip().splitlines()[-3:])
            raise PeerUnavailable(f"peer command {args[0]} failed: {tail}")
        result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    def committed(self, out: Path) -> dict[str, float]:
        data: dict[str, float] = json.loads(out.read_text())
        return data

    @contextlib.contextmanager
    def worker(self, pool: str, concurrency: int) -> Iterator[int]:
        """The peer's Celery worker; yields its pid once it consumes."""
        import redis

        redis.Redis.from_url(PEER_BROKER_URL).flushdb()
        command = [
            str(self.python),
            "-m",
            "celery",
            "-A",
            "bench.peer_django_webhook.celery_app",
            "--quiet",
        ]
        command += ["worker", "--pool", pool, "--concurrency", str(concurrency)]
        command += ["-Q", "peer.webhooks", "--loglevel", "ERROR", "--without-heartbeat"]
        command += ["--without-mingle", "--without-gossip"]
        with process(command, extra_env=self.env) as worker:
            # Ready when its broker connection is up: `celery inspect` would need a remote
            # control round trip; a short wait for the pool is enough for a benchmark.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and worker.poll() is None:
                if _has_consumer(PEER_BROKER_URL):
                    break
                time.sleep(0.3)
            if worker.poll() is not None:
                raise PeerUnavailable("the peer's worker exited at start")
            time.sleep(1.0)
            yield worker.pid


def _has_consumer(broker_url: str) -> bool:
    import redis

    # kombu's Redis transport records each bound queue under this key once a consumer starts.
    return bool(redis.Redis.from_url(broker_url).exists("_kombu.binding.peer.webhooks"))


def recreate_database() -> None:
    import psycopg

    with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {PEER_DATABASE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {PEER_DATABASE}")


class PeerSystem:
    """The peer behind the same operations as `bench.ours.OurSystem`."""

    name = "peer"
    emit_seconds = 0.0
    broker_url = PEER_BROKER_URL

    def __init__(self, *, pool: str, concurrency: int, retry_scale: float) -> None:
        self.pool, self.concurrency = pool, concurrency
        self.stack = PeerStack(ensure_venv(), retry_scale)
        self.workdir = Path(tempfile.mkdtemp(prefix="webhooks-bench-peer-"))
        recreate_database()
        self.stack.drive("setup")
        self._before = self._totals()

    def _totals(self) -> tuple[int, int, int]:
        counts = self.stack.drive("count")
        events = counts["events"]
        assert isinstance(events, dict)
        orders = counts["orders"]
        assert isinstance(orders, int)
        return orders, int(events.get("SUCCESS", 0)), sum(int(n) for n in events.values())

    def subscribe(self, url: str) -> None:
        self.stack.drive("subscribe", url)

    def subscribe_many(self, urls: list[str]) -> None:
        self.stack.drive("subscribe", *urls)

    def emit(self, count: int, per_transaction: int) -> dict[str, float]:
        self._before = self._totals()
        out = self.workdir / "committed.json"
        done = self.stack.drive("emit", count, per_transaction, out, timeout=3600)
        seconds = done["seconds"]
        assert isinstance(seconds, float)
        self.emit_seconds = seconds
        return self.stack.committed(out)

    def paced(self, rate: float, seconds: float) -> dict[str, float]:
        self._before = self._totals()
        out = self.workdir / "committed.json"
        self.stack.drive("paced", rate, seconds, out, timeout=seconds * 2 + 120)
        return self.stack.committed(out)

    def recorded(self, ids: list[str]) -> tuple[int, int, int]:
        """Orders, successful webhook events and webhook event rows since the last emit.

        django-webhook stores one WebhookEvent per attempt (its only record); it has no
        delivery row apart from it."""
        after = self._totals()
        orders, ok, rows = (a - b for a, b in zip(after, self._before, strict=True))
        return orders, ok, rows

    def rollback(self, count: int) -> list[str]:
        refs = self.stack.drive("rollback", count)["rolled_back"]
        assert isinstance(refs, list)
        return [str(ref) for ref in refs]

    def park(self, count: int, low: float, high: float) -> None:
        self.stack.drive("park", count, low, high, timeout=3600)

    @contextlib.contextmanager
    def worker(self) -> Iterator[int]:
        with self.stack.worker(self.pool, self.concurrency) as pid:
            yield pid
