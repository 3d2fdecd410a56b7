"""Isolation benchmark: `python -m bench.isolation`.

One healthy endpoint and, in the second phase, one that never answers (every request runs
into the read timeout), both subscribed to the same steady stream of events. The table
compares the healthy endpoint's commit->arrival latency alone and beside the dead one; the
bound is a p99 within 1.5x (issue #22's target; a dead endpoint must not slow the healthy
ones much). What keeps
it: at most `max_in_flight` requests per endpoint across the workers, and the circuit
breaker that stops sending to the dead one.

Same set-up as `python -m bench` (its database, Redis database and helpers): a fresh
PostgreSQL database, the fast receiver, a `celery worker` process; all on 127.0.0.1,
every loop bounded in count and time.
"""

import argparse
import contextlib
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from bench.common import (
    BROKER_URL,
    ENV,
    QUEUES,
    Results,
    free_port,
    percentile,
    process,
    recreate_database,
    wait_for_port,
)
from bench.scenarios import read_arrivals

# The healthy endpoint's p99 beside a dead one, at most this many times its p99 alone.
MAX_RATIO = 1.5
HEALTHY_PATH = "/healthy"


@contextlib.contextmanager
def never_answering_server() -> Iterator[int]:
    """Accepts connections and holds them without ever answering (a hung receiver)."""
    server = socket.create_server(("127.0.0.1", 0), backlog=512)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                conn, _ = server.accept()
                held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


@contextlib.contextmanager
def sweeping(every_seconds: float) -> Iterator[None]:
    from django.db import connection

    from deliveries import services

    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(every_seconds):
                services.sweep()
        finally:
            connection.close()

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def paced_phase(event_type: str, rate: float, seconds: float) -> dict[str, float]:
    """Emit events at a steady rate; returns commit time per event id."""
    from django.db import transaction

    from deliveries import services

    committed: dict[str, float] = {}
    total = int(rate * seconds)
    began = time.monotonic()
    for n in range(total):
        pause = began + n / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        with transaction.atomic():
            event = services.emit(event_type, {"n": n})
        committed[str(event.id)] = time.time()
    return committed


def wait_healthy(expected: int, timeout: float) -> None:
    from deliveries.models import Delivery, DeliveryStatus

    deadline = time.monotonic() + timeout
    done = 0
    while time.monotonic() < deadline:
        done = Delivery.objects.filter(
            status=DeliveryStatus.SUCCEEDED, endpoint__url__endswith=HEALTHY_PATH
        ).count()
        if done >= expected:
            return
        time.sleep(0.25)
    raise RuntimeError(f"only {done} of {expected} healthy deliveries within {timeout}s")


def latencies_ms(log: Path, committed: dict[str, float]) -> list[float]:
    arrivals = read_arrivals(log)
    return [
        (min(times) - committed[hook_id]) * 1000
        for (path, hook_id), times in arrivals.items()
        if path == HEALTHY_PATH and hook_id in committed
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=20.0, help="events/s in each phase")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    parser.add_argument("--concurrency", type=int, default=16, help="worker threads")
    parser.add_argument("--read-timeout", type=float, default=5.0, help="for the dead endpoint")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()

    # As beat does in production: the sweeper dispatches again what lost its task message.
    os.environ.update({**ENV, "WEBHOOKS_WAKE_GRACE_SECONDS": "5"})
    recreate_database()
    import django

    django.setup()
    import redis
    from django.core.management import call_command

    from deliveries import services
    from deliveries.models import Attempt, Endpoint
    from webhooks_project.models import WorkerHeartbeat
    from webhooks_project.tasks import heartbeat

    call_command("migrate", verbosity=0)
    redis.Redis.from_url(BROKER_URL).flushdb()
    workdir = Path(tempfile.mkdtemp(prefix="webhooks-isolation-"))
    peer_log = workdir / "arrivals.log"
    peer_port = free_port()
    results = Results()
    print(
        f"isolation: {args.rate:g} events/s for {args.seconds:g}s per phase, "
        f"{args.concurrency} worker threads, dead endpoint read timeout {args.read_timeout:g}s",
        flush=True,
    )
    worker_cmd = [sys.executable, "-m", "celery", "-A", "webhooks_project", "worker"]
    worker_cmd += ["--pool", "threads", "--concurrency", str(args.concurrency), "-Q", QUEUES]
    worker_cmd += [
        "--loglevel",
        os.environ.get("BENCH_WORKER_LOGLEVEL", "WARNING"),
        "--without-heartbeat",
        "--without-mingle",
    ]
    worker_cmd += ["--without-gossip"]

    with (
        process([sys.executable, "-m", "bench.peer", str(peer_port), str(peer_log)]),
        never_answering_server() as dead_port,
    ):
        wait_for_port(peer_port)
        services.endpoint_create(
            url=f"http://127.0.0.1:{peer_port}{HEALTHY_PATH}", event_types=["bench.*"]
        )
        with process(worker_cmd), sweeping(every_seconds=2.0):
            heartbeat.delay("isolation")
            deadline = time.monotonic() + 60
            while not WorkerHeartbeat.objects.filter(hostname="isolation").exists():
                if time.monotonic() > deadline:
                    raise RuntimeError("the worker did not start")
                time.sleep(0.2)

            alone = paced_phase("bench.alone", args.rate, args.seconds)
            wait_healthy(len(alone), args.timeout)

            dead, _ = services.endpoint_create(
                url=f"http://127.0.0.1:{dead_port}/dead",
                event_types=["bench.*"],
                connect_timeout_seconds=1.0,
                read_timeout_seconds=args.read_timeout,
                max_attempts=50,
                backoff_base_seconds=1.0,
                backoff_max_seconds=5.0,
            )
            beside = paced_phase("bench.beside_dead", args.rate, args.seconds)
            wait_healthy(len(alone) + len(beside), args.timeout)
            dead.refresh_from_db()
            dead_attempts = Attempt.objects.filter(delivery__endpoint=dead).count()
            transitions = list(
                dead.circuit_transitions.order_by("at").values_list("to_state", flat=True)
            )

    time.sleep(0.5)
    alone_ms = latencies_ms(peer_log, alone)
    beside_ms = latencies_ms(peer_log, beside)
    for name, values in (("healthy alone", alone_ms), ("healthy beside dead", beside_ms)):
        results.add(
            f"{name}: commit->arrival p50/p95/p99 (ms)",
            f"{percentile(values, 50):.0f} / {percentile(values, 95):.0f} / "
            f"{percentile(values, 99):.0f}",
        )
    ratio = percentile(beside_ms, 99) / max(percentile(alone_ms, 99), 1e-9)
    verdict = "within" if ratio <= MAX_RATIO else "OVER"
    results.add("p99 beside / alone", f"{ratio:.2f}x ({verdict} {MAX_RATIO}x)")
    results.add("healthy deliveries alone / beside", f"{len(alone_ms)} / {len(beside_ms)}")
    results.add("requests the dead endpoint took", str(dead_attempts))
    results.add("dead endpoint circuit", " -> ".join(["closed", *transitions]))
    results.add("dead endpoint final state", f"{Endpoint.objects.get(pk=dead.pk).circuit_state}")
    print()
    print(results.table())
    print(f"\n(arrival log {peer_log})")
    if ratio > 2:
        sys.exit(1)


if __name__ == "__main__":
    main()
