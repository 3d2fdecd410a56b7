"""What the benchmarks share: the database and broker they use (overridable from the
environment), starting and stopping processes, free ports, percentiles, the result table."""

import base64
import contextlib
import json
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Overridable so that two benchmarks on one machine do not share a database.
BENCH_DATABASE = os.environ.get("BENCH_DATABASE", "webhooks_bench")
POSTGRES_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
BROKER_URL = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/12")
QUEUES = "webhooks.fanout,webhooks.delivery,webhooks.inbox,webhooks.maintenance"
ENV = {
    "DATABASE_URL": f"{POSTGRES_URL}/{BENCH_DATABASE}",
    "CELERY_BROKER_URL": BROKER_URL,
    "DEBUG": "false",
    # Fresh keys per run (the settings refuse shipped ones with DEBUG off); every process
    # of one run gets the same, and each run starts on a new database.
    "SECRET_KEY": secrets.token_urlsafe(50),
    # A Fernet key (32 random bytes, url-safe base64), made without `cryptography`: the
    # peer's virtualenv, which imports this module too, does not have it.
    "WEBHOOKS_ENCRYPTION_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii"),
    # Plain http on loopback: no redirect to https.
    "SECURE_SSL_REDIRECT": "false",
    "LOG_LEVEL": "WARNING",
    "DJANGO_SETTINGS_MODULE": "webhooks_project.settings",
    # The benchmark's event types (bench.load and the isolation ones) are declared there.
    "WEBHOOKS_EVENT_TYPE_MODULES": "bench.event_types",
    # The bench's receiver is on loopback, over plain http.
    "WEBHOOKS_ALLOWED_NETWORKS": "127.0.0.0/8,::1",
    "WEBHOOKS_REQUIRE_HTTPS": "false",
}


@dataclass
class Results:
    rows: list[tuple[str, str]] = field(default_factory=list)

    def add(self, name: str, value: str) -> None:
        self.rows.append((name, value))
        print(f"  {name}: {value}", flush=True)
        # `python -m bench` runs the other benchmarks as processes and reads their rows here.
        rows_file = os.environ.get("BENCH_ROWS_FILE")
        if rows_file:
            with open(rows_file, "a") as out:
                out.write(json.dumps([name, value]) + "\n")

    def table(self) -> str:
        width = max(len(name) for name, _ in self.rows)
        lines = [f"| {'measure'.ljust(width)} | value |", f"|{'-' * (width + 2)}|-------|"]
        lines += [f"| {name.ljust(width)} | {value} |" for name, value in self.rows]
        return "\n".join(lines)


@dataclass
class Row:
    """One line of the side-by-side table; `met` is None where there is no target."""

    measure: str
    ours: str
    peer: str = "-"
    target: str = ""
    met: bool | None = None


def side_by_side(rows: list[Row]) -> str:
    header = ("measure", "ours", "peer", "ratio / target", "met?")
    cells = [header] + [
        (
            row.measure,
            row.ours,
            row.peer,
            row.target,
            "" if row.met is None else ("yes" if row.met else "NO"),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + " |"
        for line in cells
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {timeout}s")


def recreate_database() -> None:
    import psycopg

    with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DATABASE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DATABASE}")


@contextlib.contextmanager
def process(
    command: list[str], *, extra_env: dict[str, str] | None = None, **kwargs: object
) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, **ENV, **(extra_env or {})}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, **kwargs)  # type: ignore[call-overload]
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def procfile_web_command() -> str:
    """The Procfile's `web` line, bound to loopback."""
    for line in (ROOT / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        if name.strip() == "web":
            return command.strip().replace("0.0.0.0:", "127.0.0.1:")
    raise RuntimeError("the Procfile has no web process")


def web_command(port: int, workers: int = 2) -> list[str]:
    """The Procfile's `web` line run by this interpreter, on 127.0.0.1:`port` with `workers`
    processes (its `$PORT` and `$WEB_CONCURRENCY`). Its access log goes to stdout."""
    line = procfile_web_command().replace("${PORT:-8000}", str(port))
    line = line.replace("${WEB_CONCURRENCY:-2}", str(workers))
    args = shlex.split(line)
    if args[0] != "gunicorn" or "$" in line:
        raise RuntimeError(f"the Procfile's web line is not one this bench can run: {line}")
    return [sys.executable, "-m", *args]


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def run_paced(
    rate: float,
    seconds: float,
    action: Callable[[int], str],
    *,
    lanes: int = 4,
    on_lane_exit: Callable[[], None] = lambda: None,
) -> dict[str, float]:
    """Call `action(n)` at a steady `rate` for `seconds`; returns the time each call's id
    was committed. Several lanes (threads) share the schedule, so that one slow commit does
    not lower the offered rate; `on_lane_exit` runs in each lane's thread at its end (e.g.
    closing its database connection)."""
    total = int(rate * seconds)
    began = time.monotonic()
    committed: dict[str, float] = {}

    def lane(first: int) -> None:
        try:
            for n in range(first, total, lanes):
                pause = began + n / rate - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                ref = action(n)
                committed[ref] = time.time()
        finally:
            on_lane_exit()

    with ThreadPoolExecutor(max_workers=lanes) as pool:
        list(pool.map(lane, range(lanes)))
    return committed
