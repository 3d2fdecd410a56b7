"""Our side of `python -m bench`: the project's Django in this process (emit, counts), a
`celery worker` and `celery beat` as processes. Same operations as `peer_side.PeerSystem`."""

import contextlib
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import (
    BROKER_URL,
    ENV,
    QUEUES,
    process,
    recreate_database,
    run_paced,
)

EVENT_TYPE = "bench.load"
# The product's defaults (deliveries/models.py), which --retry-scale shrinks for the bench.
DEFAULT_BACKOFF_BASE_SECONDS = 10.0
DEFAULT_BACKOFF_MAX_SECONDS = 900.0
DEFAULT_RETRY_WINDOW_SECONDS = 24 * 3600.0


class OurSystem:
    name = "ours"
    emit_seconds = 0.0
    broker_url = BROKER_URL

    def __init__(
        self, *, pool: str, concurrency: int, retry_scale: float, db_pool: int = 0
    ) -> None:
        self.pool, self.concurrency, self.retry_scale = pool, concurrency, retry_scale
        self.db_pool = db_pool
        self.workdir = Path(tempfile.mkdtemp(prefix="webhooks-bench-ours-"))
        # Beat sweeps at the product's default interval, as a new deployment does (each
        # sweep is five maintenance messages: `BENCH_SWEEP_INTERVAL_SECONDS` for another).
        interval = os.environ.get("BENCH_SWEEP_INTERVAL_SECONDS", "15")
        os.environ.update({**ENV, "WEBHOOKS_SWEEP_INTERVAL_SECONDS": interval})
        recreate_database()
        import django

        django.setup()
        import redis
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from django.db import connection

        from bench.anchor import create_table

        with connection.cursor() as cursor:
            create_table(cursor)
        redis.Redis.from_url(BROKER_URL).flushdb()

    def subscribe(self, url: str) -> None:
        """The only endpoint from now on: earlier ones are disabled (they get nothing)."""
        self.subscribe_many([url])

    def subscribe_many(self, urls: list[str]) -> None:
        """The only endpoints from now on, each with the product's defaults (in-flight
        limit included); earlier ones are disabled."""
        from deliveries import services
        from deliveries.models import Endpoint, EndpointState

        Endpoint.objects.update(state=EndpointState.DISABLED)
        scale = self.retry_scale
        for url in urls:
            services.endpoint_create(
                url=url,
                event_types=[EVENT_TYPE],
                backoff_base_seconds=DEFAULT_BACKOFF_BASE_SECONDS * scale,
                backoff_max_seconds=DEFAULT_BACKOFF_MAX_SECONDS * scale,
                retry_window_seconds=DEFAULT_RETRY_WINDOW_SECONDS * scale,
            )

    def subscribe_ordered(self, url: str) -> None:
        """The only endpoint from now on: ordered delivery, one request at a time."""
        from deliveries import services
        from deliveries.models import Endpoint, EndpointState

        Endpoint.objects.update(state=EndpointState.DISABLED)
        services.endpoint_create(
            url=url, event_types=[EVENT_TYPE], ordered_delivery=True, max_in_flight=1
        )

    def emit_keyed(self, count: int, keys: int) -> list[tuple[str, int]]:
        """`count` events one per transaction, their ordering keys taken in turn from
        `keys`: (event id, key number) in the order they were emitted."""
        from deliveries import services

        return [
            (str(services.emit(EVENT_TYPE, {"n": n}, ordering_key=f"k{n % keys}").id), n % keys)
            for n in range(count)
        ]

    def emit(self, count: int, per_transaction: int) -> dict[str, float]:
        from django.db import transaction

        from deliveries import services

        committed: dict[str, float] = {}
        started = time.perf_counter()
        for offset in range(0, count, per_transaction):
            with transaction.atomic():
                ids = [
                    str(services.emit(EVENT_TYPE, {"n": n, "text": "x" * 200}).id)
                    for n in range(offset, min(offset + per_transaction, count))
                ]
            now = time.time()
            committed.update((event_id, now) for event_id in ids)
        self.emit_seconds = time.perf_counter() - started
        return committed

    def paced(self, rate: float, seconds: float) -> dict[str, float]:
        from django.db import connections, transaction

        from deliveries import services

        def emit_one(n: int) -> str:
            with transaction.atomic():
                return str(services.emit(EVENT_TYPE, {"n": n}).id)

        return run_paced(rate, seconds, emit_one, on_lane_exit=connections.close_all)

    def recorded(self, ids: list[str]) -> tuple[int, int, int]:
        """Events, succeeded deliveries and attempts stored for these event ids."""
        from deliveries.models import Attempt, Delivery, DeliveryStatus, Event

        events = deliveries = attempts = 0
        for start in range(0, len(ids), 5000):
            chunk = ids[start : start + 5000]
            events += Event.objects.filter(id__in=chunk).count()
            deliveries += Delivery.objects.filter(
                event_id__in=chunk, status=DeliveryStatus.SUCCEEDED
            ).count()
            attempts += Attempt.objects.filter(delivery__event_id__in=chunk).count()
        return events, deliveries, attempts

    def rollback(self, count: int) -> list[str]:
        from django.db import transaction

        from deliveries import services

        ids: list[str] = []
        with contextlib.suppress(RuntimeError), transaction.atomic():
            ids = [str(services.emit(EVENT_TYPE, {"n": n}).id) for n in range(count)]
            raise RuntimeError("roll back")
        return ids

    def park(self, count: int, low: float, high: float) -> None:
        """`count` deliveries waiting for their next attempt in `low`..`high` seconds, written
        in bulk as a failed first attempt leaves them (the database holds long waits)."""
        from django.utils import timezone

        from deliveries.models import Delivery, DeliveryStatus, Endpoint, EndpointState, Event

        endpoint = Endpoint.objects.get(state=EndpointState.ACTIVE)
        now = timezone.now()
        draw = random.Random(7).uniform
        for start in range(0, count, 5000):
            size = min(5000, count - start)
            events = Event.objects.bulk_create(
                [
                    Event(type=EVENT_TYPE, occurred_at=now, data={"n": n}, fanned_out_at=now)
                    for n in range(start, start + size)
                ]
            )
            Delivery.objects.bulk_create(
                [
                    Delivery(
                        event=event,
                        endpoint=endpoint,
                        status=DeliveryStatus.PENDING,
                        attempts=1,
                        first_attempt_at=now,
                        last_status_code=500,
                        next_attempt_at=now + timedelta(seconds=draw(low, high)),
                    )
                    for event in events
                ]
            )

    @contextlib.contextmanager
    def worker(self, log: Path | None = None, others: int = 4) -> Iterator[int]:
        """A worker (and beat for the sweeper); yields the worker's pid once it runs tasks.
        With `log`, the delivery worker's output goes there, at the Procfile's level (INFO).
        `others`: the threads of the worker of the other queues, with gevent (the
        Procfile's `worker` line has 16)."""
        from webhooks_project.models import WorkerHeartbeat
        from webhooks_project.tasks import heartbeat

        quiet = os.environ.get("BENCH_WORKER_LOGLEVEL", "WARNING")

        def celery_worker(
            pool: str, concurrency: int, queues: str, name: str, level: str = quiet
        ) -> list[str]:
            command = [sys.executable, "-m", "celery", "-A", "webhooks_project", "--quiet"]
            command += ["worker", "--pool", pool, "--concurrency", str(concurrency)]
            command += ["-Q", queues, "-n", f"{name}@%h", "--loglevel", level]
            return [*command, "--without-heartbeat", "--without-mingle", "--without-gossip"]

        # With gevent, as the Procfile runs it: the delivery queue in a gevent worker (the
        # one measured), the other queues in a small thread-pool worker beside it.
        split = self.pool == "gevent"
        delivery_queue = "webhooks.delivery"
        other_queues = ",".join(q for q in QUEUES.split(",") if q != delivery_queue)
        worker_cmd = celery_worker(
            self.pool,
            self.concurrency,
            delivery_queue if split else QUEUES,
            "delivery",
            "INFO" if log else quiet,
        )
        other_cmd = celery_worker("threads", others, other_queues, "other") if split else None
        beat_cmd = [sys.executable, "-m", "celery", "-A", "webhooks_project", "--quiet", "beat"]
        beat_cmd += ["--loglevel", "WARNING", "--schedule", str(self.workdir / "beat-schedule")]
        pooled = {"DATABASE_POOL_MAX_SIZE": str(self.db_pool)} if self.db_pool else {}
        if split:
            # As the Procfile's delivery process (see docs/operations/deployment.md).
            pooled["CELERY_BROKER_SOCKET_TIMEOUT"] = "30"
            pooled["DATABASE_POOL_TIMEOUT"] = "60"
            pooled["CELERY_WORKER_SEND_TASK_EVENTS"] = "false"
        with contextlib.ExitStack() as running:
            output: dict[str, Any] = {}
            if log:
                output = {"stdout": running.enter_context(log.open("ab"))}
                output["stderr"] = subprocess.STDOUT
            worker = running.enter_context(process(worker_cmd, extra_env=pooled, **output))
            if other_cmd:
                running.enter_context(process(other_cmd))
            running.enter_context(process(beat_cmd))
            marker = f"bench-{worker.pid}"
            deadline = time.monotonic() + 120
            asked_at = 0.0
            while not WorkerHeartbeat.objects.filter(hostname=marker).exists():
                if time.monotonic() > deadline or worker.poll() is not None:
                    raise RuntimeError("our worker did not start")
                if time.monotonic() - asked_at > 10:
                    # Again now and then: a message sent before the queues were bound on
                    # a flushed Redis is routed nowhere.
                    heartbeat.delay(marker)
                    asked_at = time.monotonic()
                time.sleep(0.2)
            time.sleep(1.0)
            yield worker.pid


@contextlib.contextmanager
def api_poster() -> Iterator[Callable[[int], tuple[float, dict[str, float]]]]:
    """`api_session`'s server, and one client that POSTs events to `/api/v1/events` one per
    request, one after another, as a product emitting events one at a time would. Yields
    `post(count)`, which returns when the first POST started and each event's id with the
    time it was accepted."""
    from bench.api_ingest import api_session

    with api_session("bench-slow-api") as (api, base):
        url = f"{base}/events"
        # Both workers' first requests (imports, connections) are not the run's.
        for _ in range(8):
            api.post(url, json={"type": "bench.warm-up", "data": {}}, timeout=10)

        def post(count: int) -> tuple[float, dict[str, float]]:
            started, accepted = time.time(), {}
            for n in range(count):
                answer = api.post(url, json={"type": EVENT_TYPE, "data": {"n": n}}, timeout=10)
                answer.raise_for_status()
                accepted[str(answer.json()["id"])] = time.time()
            return started, accepted

        yield post
