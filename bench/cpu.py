"""CPU per event and per delivery, in one process: `python -m bench.cpu`.

No broker hop and no worker: events are emitted here (one per transaction, or many per
transaction), then their deliveries are sent here by the same service the delivery task
calls, an endpoint's owner (the fan-out of events left to the fan-out task is done first,
outside the figures), against the fast receiver on 127.0.0.1. `time.process_time()` counts this
process's CPU only (Django, psycopg, the HTTP client, signing, recording), not
PostgreSQL's or the receiver's. `--profile N` prints the N costliest functions of attempting
the batches (cProfile); with `--profile-one-at-a-time`, of events one at a time.
"""

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import BROKER_URL, ENV, free_port, process, recreate_database, wait_for_port


@dataclass
class Cost:
    """What one item of work cost this process and the servers it talked to."""

    cpu_ms: float
    statements: float
    writes: float
    redis_commands: float
    messages: float


def _redis_calls(client: Any) -> tuple[int, int]:
    """(all commands, LPUSH + RPUSH) the broker's Redis has served (all its clients: exact
    on a Redis of the benchmark's own, `BENCH_BROKER_URL`)."""
    stats = client.info("commandstats")
    total = sum(int(v.get("calls", 0)) for v in stats.values())
    pushes = sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("lpush", "rpush"))
    return total, pushes


def cost(work: Callable[[], int], broker: Any) -> Cost:
    """The costs per item of `work` (which returns how many items it did)."""
    from django.db import connection

    counts = {"statements": 0, "writes": 0}

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        counts["statements"] += 1
        if sql.lstrip()[:6].upper() in ("INSERT", "UPDATE", "DELETE"):
            counts["writes"] += 1
        return execute(sql, params, many, context)

    redis_before, pushes_before = _redis_calls(broker)
    started = time.process_time()
    with connection.execute_wrapper(count):
        done = max(work(), 1)
    cpu = (time.process_time() - started) * 1000 / done
    redis_after, pushes_after = _redis_calls(broker)
    return Cost(
        cpu,
        counts["statements"] / done,
        counts["writes"] / done,
        (redis_after - redis_before) / done,
        (pushes_after - pushes_before) / done,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        help="print this many functions (of owners through a backlog)",
    )
    parser.add_argument(
        "--profile-one-at-a-time",
        action="store_true",
        help="profile events one at a time (emit, then its owner) instead",
    )
    parser.add_argument(
        "--callees",
        default="",
        help="with --profile, also print what functions matching this regex called",
    )
    args = parser.parse_args()

    os.environ.update(ENV)
    recreate_database()
    import django

    django.setup()
    import redis
    from django.core.management import call_command
    from django.db import transaction

    from deliveries import services
    from deliveries.models import Delivery, DeliveryStatus, Event

    call_command("migrate", verbosity=0)
    broker = redis.Redis.from_url(BROKER_URL)
    workdir = Path(tempfile.mkdtemp(prefix="webhooks-cpu-"))
    port = free_port()
    with process([sys.executable, "-m", "bench.peer", str(port), str(workdir / "log")]):
        wait_for_port(port)
        services.endpoint_create(url=f"http://127.0.0.1:{port}/cpu", event_types=["bench.*"])

        def emit_one_per_transaction() -> int:
            for n in range(args.events):
                with transaction.atomic():
                    services.emit("bench.load", {"n": n})
            return args.events

        def emit_in_one_transaction() -> int:
            with transaction.atomic():
                for n in range(args.events):
                    services.emit("bench.load", {"n": n})
            return args.events

        def fan_out_the_rest() -> None:
            """Deliveries for the events left to the fan-out task (no worker runs here)."""
            waiting = Event.objects.filter(fanned_out_at__isnull=True)
            services.events_fan_out(event_ids=list(waiting.values_list("pk", flat=True)))

        def pending() -> list[int]:
            ids = Delivery.objects.filter(status=DeliveryStatus.PENDING).order_by("pk")
            return list(ids.values_list("pk", flat=True))

        def owners_through_backlog() -> Callable[[], int]:
            """The pending deliveries, sent by their endpoints' owners as a wake message
            runs them (each owner claims up to its in-flight limit at a time)."""
            fan_out_the_rest()
            ids = pending()
            endpoints = set(
                Delivery.objects.filter(pk__in=ids).values_list("endpoint_id", flat=True)
            )

            def work() -> int:
                for endpoint_id in endpoints:
                    services.endpoint_work(endpoint_id=endpoint_id)
                return len(ids)

            return work

        def owner_per_event() -> int:
            """Events one at a time, each sent by an owner of its own (the wake, the take,
            the claim, the request, the record, the hand-back)."""
            endpoint_ids = list(Delivery.objects.values_list("endpoint_id", flat=True)[:1])
            for n in range(args.events // 5):
                with transaction.atomic():
                    services.emit("bench.load", {"n": n})
                for endpoint_id in endpoint_ids:
                    services.endpoint_work(endpoint_id=endpoint_id)
            return args.events // 5

        # A warm-up: imports, prepared connections, the HTTP pool.
        emit_one_per_transaction()
        owners_through_backlog()()
        rows = []
        rows.append(("emit, one event per transaction", cost(emit_one_per_transaction, broker)))
        broker.flushdb()
        backlog = owners_through_backlog()
        rows.append(("delivery, an owner through a backlog", cost(backlog, broker)))
        broker.flushdb()
        rows.append(
            ("event + delivery, one at a time (an owner each)", cost(owner_per_event, broker))
        )
        emit_many = f"emit, {args.events} events in one transaction"
        rows.append((emit_many, cost(emit_in_one_transaction, broker)))
        broker.flushdb()
        backlog = owners_through_backlog()
        rows.append(("delivery, an owner through a backlog", cost(backlog, broker)))
        broker.flushdb()
        print(
            "| per item | CPU ms (this process) | SQL statements | of them writes "
            "| Redis commands | task messages |\n| --- | --- | --- | --- | --- | --- |"
        )
        for name, c in rows:
            print(
                f"| {name} | {c.cpu_ms:.2f} | {c.statements:.1f} | {c.writes:.1f} "
                f"| {c.redis_commands:.1f} | {c.messages:.2f} |"
            )
        if args.profile:
            emit_one_per_transaction()
            broker.flushdb()
            profiler = cProfile.Profile(time.process_time)  # CPU, as the table
            if args.profile_one_at_a_time:
                owners_through_backlog()()
                profiler.runcall(owner_per_event)
            else:
                profiler.runcall(owners_through_backlog())
            stats = pstats.Stats(profiler).sort_stats("cumulative")
            stats.print_stats(args.profile)
            if args.callees:
                stats.print_callees(args.callees)


if __name__ == "__main__":
    main()
