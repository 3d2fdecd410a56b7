"""Benchmark of the sending pipeline on loopback: `make bench` (or `python -m bench`).

Starts what it needs (a fresh PostgreSQL database, a Redis database, a fast receiver, a
Celery worker process and gunicorn), sends events to K endpoints and prints a table:
events/s accepted by `emit` and by the API, deliveries/s end to end, latency from commit to
arrival, lost and duplicated deliveries, and the worker's memory. Everything stays on
127.0.0.1 and every loop is bounded in count and time.
"""

import argparse
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import requests

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
    "SECRET_KEY": "bench-secret-key-" + "x" * 40,
    "WEBHOOKS_ENCRYPTION_KEY": "Xj12CFzqtYLFParsutiJDIxnirNujtbEGL2ZbUylLmM=",
    "LOG_LEVEL": "WARNING",
    "DJANGO_SETTINGS_MODULE": "webhooks_project.settings",
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

    def table(self) -> str:
        width = max(len(name) for name, _ in self.rows)
        lines = [f"| {'measure'.ljust(width)} | value |", f"|{'-' * (width + 2)}|-------|"]
        lines += [f"| {name.ljust(width)} | {value} |" for name, value in self.rows]
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
def process(command: list[str], **kwargs: object) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **ENV}, **kwargs)  # type: ignore[call-overload]
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


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children, in MB."""
    total = 0
    pids = [pid]
    with contextlib.suppress(OSError):
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(child) for child in children]
    for each in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


class PeakSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self._stop_event = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(0.2):
            self.peak = max(self.peak, rss_mb(self.pid))

    def stop(self) -> float:
        self._stop_event.set()
        self.join()
        return self.peak


def ceiling(url: str, count: int, keep_alive: bool) -> float:
    """Requests/s one Python process sends to the receiver with plain `requests`."""
    body = b'{"id":"x","type":"bench.ceiling","data":{}}'
    headers = {"Content-Type": "application/json", "X-Webhook-Id": "ceiling"}
    session = requests.Session()
    started = time.perf_counter()
    for _ in range(count):
        if keep_alive:
            session.post(url, data=body, headers=headers, timeout=5).raise_for_status()
        else:
            requests.post(url, data=body, headers=headers, timeout=5).raise_for_status()
    return count / (time.perf_counter() - started)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def read_arrivals(log: Path) -> dict[tuple[str, str], list[float]]:
    arrivals: dict[tuple[str, str], list[float]] = defaultdict(list)
    for line in log.read_text().splitlines():
        at, path, hook_id, status = line.split()
        if status == "200" and hook_id != "ceiling":
            arrivals[(path, hook_id)].append(float(at))
    return arrivals


def wait_delivered(expected: int, timeout: float) -> float:
    from deliveries.models import Delivery, DeliveryStatus

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count()
        if done >= expected:
            return time.time()
        time.sleep(0.25)
    raise RuntimeError(f"only {done} of {expected} deliveries succeeded within {timeout}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="events in the bulk phase")
    parser.add_argument("--endpoints", type=int, default=2, help="endpoints subscribed to all")
    parser.add_argument("--api-events", type=int, default=500)
    parser.add_argument("--rate", type=float, default=50.0, help="paced phase, events/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="paced phase length")
    parser.add_argument("--pool", default="threads")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()

    os.environ.update(ENV)
    recreate_database()
    import django

    django.setup()
    import redis
    from django.core.management import call_command
    from django.db import transaction

    from deliveries import services
    from deliveries.models import ApiToken
    from webhooks_project.models import WorkerHeartbeat
    from webhooks_project.tasks import heartbeat

    call_command("migrate", verbosity=0)
    redis.Redis.from_url(BROKER_URL).flushdb()
    results = Results()
    workdir = Path(tempfile.mkdtemp(prefix="webhooks-bench-"))
    peer_log = workdir / "arrivals.log"
    peer_port, web_port = free_port(), free_port()

    print(
        f"bench: {args.events} events x {args.endpoints} endpoints, pool={args.pool} "
        f"concurrency={args.concurrency}",
        flush=True,
    )
    with process([sys.executable, "-m", "bench.peer", str(peer_port), str(peer_log)]):
        wait_for_port(peer_port)
        peer = f"http://127.0.0.1:{peer_port}"
        results.add(
            "ceiling: requests keep-alive, 1 process (req/s)",
            f"{ceiling(peer + '/ceiling', 2000, True):.0f}",
        )
        results.add(
            "ceiling: requests new connection (req/s)",
            f"{ceiling(peer + '/ceiling', 500, False):.0f}",
        )
        for k in range(args.endpoints):
            services.endpoint_create(url=f"{peer}/e/{k}", event_types=["*"])

        worker_cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "webhooks_project",
            "worker",
            "--pool",
            args.pool,
            "--concurrency",
            str(args.concurrency),
            "-Q",
            QUEUES,
            "--loglevel",
            "WARNING",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
        ]
        web_cmd = [
            sys.executable,
            "-m",
            "gunicorn",
            "webhooks_project.wsgi",
            "--bind",
            f"127.0.0.1:{web_port}",
            "--workers",
            "2",
            "--threads",
            "4",
            "--log-level",
            "warning",
        ]
        with process(worker_cmd) as worker, process(web_cmd):
            heartbeat.delay("bench")
            deadline = time.monotonic() + 60
            while not WorkerHeartbeat.objects.filter(hostname="bench").exists():
                if time.monotonic() > deadline:
                    raise RuntimeError("the worker did not start")
                time.sleep(0.2)
            time.sleep(1.0)
            idle_rss = rss_mb(worker.pid)
            sampler = PeakSampler(worker.pid)
            sampler.start()

            # Bulk: emit as fast as the product can, 100 events per transaction.
            commit_at: dict[str, float] = {}
            started = time.perf_counter()
            for offset in range(0, args.events, 100):
                with transaction.atomic():
                    batch = [
                        services.emit("bench.bulk", {"n": n, "text": "x" * 200})
                        for n in range(offset, min(offset + 100, args.events))
                    ]
                now = time.time()
                commit_at.update((str(event.id), now) for event in batch)
            emit_rate = args.events / (time.perf_counter() - started)
            results.add("emit(): events/s accepted (100 per transaction)", f"{emit_rate:.0f}")
            first_commit = min(commit_at.values())
            expected = args.events * args.endpoints
            wait_delivered(expected, args.timeout)
            arrivals = read_arrivals(peer_log) if peer_log.exists() else {}
            bulk_last = max((min(times) for times in arrivals.values()), default=first_commit)
            results.add(
                "bulk: deliveries/s end to end", f"{expected / (bulk_last - first_commit):.0f}"
            )
            bulk_latency = [
                min(t) - commit_at[hid] for (_, hid), t in arrivals.items() if hid in commit_at
            ]

            # API: events/s accepted over HTTP by gunicorn, 4 client threads.
            _, token = ApiToken.issue("bench")
            wait_for_port(web_port)
            api = requests.Session()
            api.headers["Authorization"] = f"Bearer {token}"
            url = f"http://127.0.0.1:{web_port}/api/v1/events"

            def post_event(n: int) -> None:
                api.post(
                    url, json={"type": "bench.api", "data": {"n": n}}, timeout=10
                ).raise_for_status()

            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=4) as pool:
                list(pool.map(post_event, range(args.api_events)))
            results.add(
                "API: events/s accepted (4 clients)",
                f"{args.api_events / (time.perf_counter() - started):.0f}",
            )
            expected += args.api_events * args.endpoints
            wait_delivered(expected, args.timeout)

            # Paced: latency from commit to arrival when the offered load is steady.
            paced_commit: dict[str, float] = {}
            total = int(args.rate * args.seconds)
            began = time.monotonic()
            for n in range(total):
                target = began + n / args.rate
                pause = target - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                with transaction.atomic():
                    event = services.emit("bench.paced", {"n": n})
                paced_commit[str(event.id)] = time.time()
            expected += total * args.endpoints
            wait_delivered(expected, args.timeout)
            peak_rss = sampler.stop()

    time.sleep(0.5)
    arrivals = read_arrivals(peer_log)
    paced_latency = [
        min(t) - paced_commit[hid] for (_, hid), t in arrivals.items() if hid in paced_commit
    ]
    for name, values in (("bulk", bulk_latency), (f"paced {args.rate:.0f}/s", paced_latency)):
        ms = [v * 1000 for v in values]
        results.add(
            f"{name}: commit->arrival p50/p95/p99 (ms)",
            f"{percentile(ms, 50):.0f} / {percentile(ms, 95):.0f} / {percentile(ms, 99):.0f}",
        )
    unique = len(arrivals)
    duplicates = sum(len(times) - 1 for times in arrivals.values())
    results.add("deliveries expected / arrived", f"{expected} / {unique}")
    results.add("lost / duplicated", f"{expected - unique} / {duplicates}")
    results.add("worker RSS idle / peak (MB)", f"{idle_rss:.0f} / {peak_rss:.0f}")
    print()
    print(results.table())
    print(
        f"\n(mean bulk latency {statistics.fmean(bulk_latency) * 1000:.0f} ms; "
        f"arrival log {peer_log})"
    )


if __name__ == "__main__":
    main()
