"""Benchmark of the receiving side on loopback: `python -m bench.receiving`.

A burst of signed events (our scheme, 10,000 by default) is POSTed to `/receivers/<slug>/`
served by gunicorn on 127.0.0.1: each request is verified (HMAC over the raw body, timestamp
window), inserted into the inbox (`ON CONFLICT DO NOTHING`), committed and answered, and its
processing message sent to Redis. The same server, with the same middleware, first serves
a trivial Django view (`/bench/noop`) as the baseline. It prints requests/s and p50/p99
latency of both, then checks that every event is in the inbox exactly once.

The two alternate in ``--rounds`` rounds (a slice of baseline requests, then a slice of the
burst), so that a change of load on a shared machine during the run weighs on both alike;
the ratio of their requests/s is the figure to compare between runs.

No Celery worker runs: this measures accepting webhooks, not processing them. The client
is an asyncio keep-alive client (stdlib only) with a fixed number of connections; a request
whose connection breaks is sent again, as a provider would, and must come back `duplicate`
or `accepted`, never twice in the inbox. Everything is bounded in count and time.
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import redis

from bench.common import (
    BROKER_URL,
    Results,
    free_port,
    percentile,
    process,
    recreate_database,
    wait_for_port,
    web_command,
)

#: The receiver's target (docs/performance/benchmarks.md): at least half the requests/s of
#: the trivial view in the same run, and a p99 within 50 ms.
TARGET_RATIO = 0.5
TARGET_P99_MS = 50.0
SLUG = "bench"
T = TypeVar("T")
WARMUP_SLUG = "bench-warmup"
IO_TIMEOUT_SECONDS = 30.0
MAX_RESENDS = 3


@dataclass
class BurstResult:
    latencies_ms: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    resends: int = 0
    refused: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return len(self.latencies_ms) / self.seconds if self.seconds else 0.0

    def add(self, other: "BurstResult") -> None:
        self.latencies_ms += other.latencies_ms
        for code, n in other.statuses.items():
            self.statuses[code] = self.statuses.get(code, 0) + n
        for outcome, n in other.outcomes.items():
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + n
        self.resends += other.resends
        self.refused += other.refused
        self.seconds += other.seconds


def raw_request(port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    head = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """Status, body, and whether the server keeps the connection open."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    length, keep_alive = None, True
    for line in lines[1:]:
        name, _, value = line.partition(":")
        lowered = name.strip().lower()
        if lowered == "content-length":
            length = int(value)
        elif lowered == "connection" and value.strip().lower() == "close":
            keep_alive = False
    body = await reader.readexactly(length) if length is not None else await reader.read()
    return status, body, keep_alive and length is not None


async def burst(port: int, requests_: Sequence[bytes], connections: int) -> BurstResult:
    """Send every request once (again only if its connection broke), `connections` at a time."""
    result = BurstResult()
    pending = iter(range(len(requests_)))

    async def connection_loop() -> None:
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        for index in pending:
            for attempt in range(MAX_RESENDS + 1):
                try:
                    if writer is None or reader is None:
                        reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    started = time.perf_counter()
                    writer.write(requests_[index])
                    await writer.drain()
                    status, body, keep_alive = await asyncio.wait_for(
                        read_response(reader), IO_TIMEOUT_SECONDS
                    )
                    result.latencies_ms.append((time.perf_counter() - started) * 1000)
                    result.statuses[status] = result.statuses.get(status, 0) + 1
                    outcome = _outcome(body)
                    result.outcomes[outcome] = result.outcomes.get(outcome, 0) + 1
                    if not keep_alive:
                        writer.close()
                        reader = writer = None
                    break
                except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError) as exc:
                    if isinstance(exc, ConnectionRefusedError):
                        result.refused += 1
                    if writer is not None:
                        writer.close()
                    reader = writer = None
                    if attempt == MAX_RESENDS:
                        raise
                    result.resends += 1
        if writer is not None:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(connection_loop() for _ in range(connections)))
    result.seconds = time.perf_counter() - started
    return result


def _share(items: Sequence[T], n: int, rounds: int) -> Sequence[T]:
    """The ``n``-th of ``rounds`` consecutive slices of ``items``."""
    return items[len(items) * n // rounds : len(items) * (n + 1) // rounds]


def _outcome(body: bytes) -> str:
    try:
        return str(json.loads(body).get("status", "-"))
    except (ValueError, AttributeError):
        return "-"


def signed_requests(
    port: int, slug: str, secret: str, count: int, event_type: str
) -> tuple[list[bytes], list[str]]:
    """`count` events as our sender would send them: signed, with the X-Webhook-* headers."""
    from webhooks_core.crypto import signing

    timestamp = int(time.time())
    requests_, ids = [], []
    for n in range(count):
        event_id = str(uuid.uuid4())
        body = json.dumps(
            {
                "id": event_id,
                "type": event_type,
                "version": 1,
                "occurred_at": "2026-04-15T10:12:34Z",
                "data": {"n": n, "text": "x" * 200},
            },
            separators=(",", ":"),
        ).encode()
        headers = signing.signature_headers(
            [secret], msg_id=event_id, timestamp=timestamp, body=body
        )
        headers = {**headers, "X-Webhook-Id": event_id, "X-Webhook-Timestamp": str(timestamp)}
        headers["X-Webhook-Event"] = event_type
        requests_.append(raw_request(port, f"/receivers/{slug}/", body, headers))
        ids.append(event_id)
    return requests_, ids


def summarize(results: Results, name: str, burst_result: BurstResult) -> None:
    ms = burst_result.latencies_ms
    results.add(f"{name}: requests/s", f"{burst_result.rate:.0f}")
    results.add(
        f"{name}: latency p50 / p99 (ms)", f"{percentile(ms, 50):.1f} / {percentile(ms, 99):.1f}"
    )
    statuses = ", ".join(f"{code}: {n}" for code, n in sorted(burst_result.statuses.items()))
    results.add(
        f"{name}: answers", f"{statuses}; resent after a broken connection: {burst_result.resends}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000, help="signed events in the burst")
    parser.add_argument("--noop-requests", type=int, default=10_000, help="baseline requests")
    parser.add_argument("--connections", type=int, default=16, help="client connections")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument(
        "--worker-class", help="gunicorn's, instead of the Procfile's web line (gthread, gevent)"
    )
    parser.add_argument("--threads", type=int, default=4, help="threads per gthread worker")
    parser.add_argument("--burst", type=int, default=20_000, help="signed events of the burst")
    parser.add_argument("--burst-connections", type=int, default=32, help="the burst's clients")
    parser.add_argument("--rounds", type=int, default=5, help="baseline/receiver alternations")
    parser.add_argument("--timeout", type=float, default=600.0, help="limit for each burst")
    args = parser.parse_args()
    if not 1 <= args.events <= 100_000 or not 1 <= args.noop_requests <= 100_000:
        parser.error("--events and --noop-requests must be between 1 and 100000")
    if not 0 <= args.burst <= 100_000 or not 1 <= args.burst_connections <= 1000:
        parser.error("--burst must be between 0 and 100000, --burst-connections 1 to 1000")
    if not 1 <= args.rounds <= min(args.events, args.noop_requests, 100):
        parser.error("--rounds must be between 1 and 100, and at most the number of requests")

    from bench.common import ENV

    os.environ.update(ENV)
    recreate_database()
    import django

    django.setup()
    from django.core.management import call_command

    from receivers import services
    from receivers.models import InboxEvent

    call_command("migrate", verbosity=0)
    from django.db import connection

    from bench.anchor import create_table
    from webhooks_core.models import ApiToken

    with connection.cursor() as cursor:
        create_table(cursor)
    _, token = ApiToken.issue("bench-receiving")
    broker = redis.Redis.from_url(BROKER_URL)
    broker.flushdb()
    # A generous window: the burst is signed before it is sent, and a slow run must not
    # turn into timestamp rejections.
    source, secret = services.source_create(slug=SLUG, scheme="ours", tolerance_seconds=3600)
    _, warmup_secret = services.source_create(slug=WARMUP_SLUG, scheme="ours")

    port = free_port()
    results = Results()
    if args.worker_class is None:
        web_cmd = web_command(port, args.workers)
        server = f"the Procfile's web line, {args.workers} workers"
    else:
        web_cmd = [sys.executable, "-m", "gunicorn", "webhooks_project.wsgi"]
        web_cmd += ["--bind", f"127.0.0.1:{port}", "--workers", str(args.workers)]
        web_cmd += ["--worker-class", args.worker_class, "--log-level", "warning"]
        if args.worker_class == "gthread":
            web_cmd += ["--threads", str(args.threads)]
            server = f"{args.workers} workers x {args.threads} threads"
        else:
            web_cmd += ["--worker-connections", "1000", "--keep-alive", "5"]
            server = f"{args.workers} {args.worker_class} workers"
    print(
        f"bench.receiving: {args.events} signed events, {args.noop_requests} baseline requests, "
        f"{args.rounds} rounds, {args.connections} connections, gunicorn {server} on "
        f"127.0.0.1:{port}; then a burst of {args.burst} from {args.burst_connections}",
        flush=True,
    )
    noop_body = b'{"id":"noop","type":"bench.noop","data":{"text":"' + b"x" * 200 + b'"}}'
    noop = [raw_request(port, "/bench/noop", noop_body, {})]
    # The writing view: the same body, the API's bearer token, one row inserted and committed.
    write = [raw_request(port, "/bench/write", noop_body, {"Authorization": f"Bearer {token}"})]
    burst_requests, sent_ids = signed_requests(port, SLUG, secret, args.events, "bench.burst")
    big_burst, big_ids = signed_requests(port, SLUG, secret, args.burst, "bench.burst")
    warmup, _ = signed_requests(port, WARMUP_SLUG, warmup_secret, 200, "bench.warmup")

    def run(requests_: Sequence[bytes], connections: int = args.connections) -> BurstResult:
        return asyncio.run(asyncio.wait_for(burst(port, requests_, connections), args.timeout))

    # The access log (the Procfile's, on stdout) is written, and dropped.
    web_env = {"DJANGO_SETTINGS_MODULE": "bench.settings"}
    with process(web_cmd, extra_env=web_env, stdout=subprocess.DEVNULL):
        wait_for_port(port)
        run(noop * 200)  # warm-up: connections, imports, database connections
        run(write * 200)
        run(warmup)
        trivial, anchor, receiver = BurstResult(), BurstResult(), BurstResult()
        for n in range(args.rounds):
            share = len(_share(range(args.noop_requests), n, args.rounds))
            trivial.add(run(noop * share))
            anchor.add(run(write * share))
            receiver.add(run(_share(burst_requests, n, args.rounds)))
        summarize(results, "trivial Django view", trivial)
        summarize(results, "writing view (bearer token + insert + commit)", anchor)
        summarize(results, "receiver (verify + insert + commit)", receiver)
        ratio = receiver.rate / anchor.rate if anchor.rate else 0.0
        p99 = percentile(receiver.latencies_ms, 99)
        met = ratio >= TARGET_RATIO and p99 <= TARGET_P99_MS
        results.add(
            "receiver / writing view requests/s",
            f"{ratio:.0%} (target >= {TARGET_RATIO:.0%} and p99 <= {TARGET_P99_MS:.0f} ms: "
            f"{'met' if met else 'not met'}); of the trivial view "
            f"{receiver.rate / trivial.rate if trivial.rate else 0.0:.0%}",
        )
        big = BurstResult()
        if args.burst:
            big = run(big_burst, args.burst_connections)
            summarize(results, f"burst of {args.burst} from {args.burst_connections}", big)
            errors = sum(n for code, n in big.statuses.items() if code >= 500)
            results.add(
                "burst: 5xx / connections refused",
                f"{errors} / {big.refused} (target 0 / 0: "
                f"{'met' if errors == 0 and big.refused == 0 else 'not met'})",
            )

    stored = InboxEvent.objects.filter(source=source)
    stored_ids = list(stored.values_list("event_id", flat=True))
    unique = set(stored_ids)
    if args.burst:
        sent_ids += big_ids
    results.add(
        "inbox rows / unique ids / events sent",
        f"{len(stored_ids)} / {len(unique)} / {len(sent_ids)}",
    )
    lost = len(set(sent_ids) - unique)
    duplicated = len(stored_ids) - len(unique)
    results.add("lost / duplicated", f"{lost} / {duplicated}")
    outcomes = ", ".join(f"{name}: {n}" for name, n in sorted(receiver.outcomes.items()))
    results.add("receiver answers by outcome", outcomes)
    broker.flushdb()  # the processing messages no worker consumed
    print()
    print(results.table())
    ok = lost == 0 and duplicated == 0 and set(receiver.statuses) | set(big.statuses) <= {200}
    if not ok:
        print("\nFAILED: the inbox does not hold every event exactly once", file=sys.stderr)
        sys.exit(1)
    print(f"\nevery one of the {len(sent_ids)} events is in the inbox exactly once")


if __name__ == "__main__":
    main()
