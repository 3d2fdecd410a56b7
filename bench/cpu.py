"""CPU per event and per delivery, in one process: `python -m bench.cpu`.

No broker hop and no worker: events are emitted here (one per transaction, or many per
transaction), then their deliveries are attempted here by the same service the delivery
task calls (the fan-out of events left to the fan-out task is done first, outside the
figures), against the fast receiver on 127.0.0.1. `time.process_time()` counts this
process's CPU only (Django, psycopg, the HTTP client, signing, recording), not
PostgreSQL's or the receiver's. `--profile N` prints the N costliest functions of attempting
the batches (cProfile).
"""

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import BROKER_URL, ENV, free_port, process, recreate_database, wait_for_port


def cpu_ms(work: Callable[[], int]) -> float:
    """CPU milliseconds per item of `work` (which returns how many items it did)."""
    started = time.process_time()
    count = work()
    return (time.process_time() - started) * 1000 / max(count, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--batch", type=int, default=50, help="deliveries per batch")
    parser.add_argument(
        "--profile", type=int, default=0, help="print this many functions (of a batch of --batch)"
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

        def attempt_in_batches(size: int) -> Callable[[], int]:
            """The pending deliveries, `size` ids per call as a task message names them
            (a batch may take other due ones along; their calls then claim nothing)."""
            fan_out_the_rest()
            ids = pending()

            def work() -> int:
                for start in range(0, len(ids), size):
                    services.deliveries_attempt(delivery_ids=ids[start : start + size])
                return len(ids)

            return work

        # A warm-up: imports, prepared connections, the HTTP pool.
        emit_one_per_transaction()
        attempt_in_batches(args.batch)()
        rows = []
        rows.append(("emit, one event per transaction", cpu_ms(emit_one_per_transaction)))
        broker.flushdb()
        rows.append(("delivery, one message each", cpu_ms(attempt_in_batches(1))))
        rows.append(
            (f"emit, {args.events} events in one transaction", cpu_ms(emit_in_one_transaction))
        )
        broker.flushdb()
        rows.append((f"delivery, {args.batch} per message", cpu_ms(attempt_in_batches(args.batch))))
        broker.flushdb()
        print("| measure (this process's CPU) | ms |\n| --- | --- |")
        for name, value in rows:
            print(f"| {name} | {value:.2f} |")
        if args.profile:
            emit_one_per_transaction()
            broker.flushdb()
            profiler = cProfile.Profile()
            profiler.runcall(attempt_in_batches(args.batch))
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile)


if __name__ == "__main__":
    main()
