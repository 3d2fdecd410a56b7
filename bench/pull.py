"""Pull delivery beside push, in the same run of `python -m bench` (scenario ``pull``).

Two rows, both over real HTTP through the Procfile's `web` line (gunicorn, gevent):

- **backlog**: one consumer reads a polling endpoint's backlog (100,000 deliveries;
  5,000 with ``--quick``; written in bulk as fan-out writes them) from start to end in pages of 100
  (``GET /api/v1/poll/{id}?iterator=…&limit=100``): messages/s, against the same run's
  push rate to the fast receiver (the ``throughput`` row). Target: at least 5x.
- **long polling**: events emitted one per transaction at ``--rate`` for ``--seconds``
  (as the ``latency`` scenario does) while one consumer long-polls the feed
  (``wait=10``): commit → the consumer's answer, p50 / p95 / p99, against push's
  commit → arrival in the same run. Target: p50 and p99 within 2x of push's.
"""

import argparse
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

from bench.common import (
    Row,
    free_port,
    percentile,
    process,
    procfile_web_command,
    wait_for_port,
)

if TYPE_CHECKING:
    from bench.ours import OurSystem
    from bench.scenarios import Measured

PAGE = 100
WAIT = 10
PUSH_RATIO = 5.0
LATENCY_RATIO = 2.0
BACKLOG = {"full": 100_000, "quick": 5_000}


@dataclass
class Backlog:
    messages: int
    pages: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0


@dataclass
class PullLatency:
    offered: int
    arrived: int
    p50: float
    p95: float
    p99: float


@dataclass
class Pull:
    backlog: Backlog | None = None
    latency: PullLatency | None = None


@contextlib.contextmanager
def web(log: Path) -> Iterator[str]:
    """The Procfile's `web` line on a free port, as honcho runs it (through sh, its
    default of workers); yields its base URL. Its access log goes to `log`."""
    port = free_port()
    # The virtualenv's gunicorn, as an activated environment finds it.
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    with (
        log.open("ab") as out,
        process(
            ["sh", "-c", "exec " + procfile_web_command()],
            extra_env={"PORT": str(port), "PATH": path},
            stdout=out,
            stderr=subprocess.STDOUT,
        ),
    ):
        wait_for_port(port, timeout=60)
        yield f"http://127.0.0.1:{port}"


def read_backlog(poll_url: str, key: str, count: int, timeout: float) -> Backlog:
    """One consumer reads from the feed's start, page after page of `PAGE`, until
    `count` messages came (or `timeout`); each page's iterator asks for the next. The
    reading starts once the backlog is visible (a row is, once every older transaction
    of the database cluster has ended)."""
    deadline = time.monotonic() + timeout
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {key}"
        # Not timed: each gunicorn worker's first request imports and connects.
        warm = 0
        while warm < 4 and time.monotonic() < deadline:
            first = session.get(poll_url, params={"limit": 1}, timeout=30)
            first.raise_for_status()
            warm += 1 if first.json()["data"] else 0
        messages = pages = 0
        iterator = ""
        started = time.perf_counter()
        while messages < count and time.monotonic() < deadline:
            params: dict[str, Any] = {"limit": PAGE}
            if iterator:
                params["iterator"] = iterator
            answer = session.get(poll_url, params=params, timeout=60)
            answer.raise_for_status()
            page = answer.json()
            messages += len(page["data"])
            pages += 1
            iterator = page["iterator"]
        return Backlog(messages, pages, time.perf_counter() - started)


@contextlib.contextmanager
def long_polling(poll_url: str, key: str) -> Iterator[dict[str, float]]:
    """A consumer long-polling the feed from its start: yields {event id: when its page
    came}, filled while the block runs."""
    arrived: dict[str, float] = {}
    stop = threading.Event()
    problems: list[str] = []

    def consume() -> None:
        iterator = ""
        with requests.Session() as session:
            session.headers["Authorization"] = f"Bearer {key}"
            while not stop.is_set():
                params: dict[str, Any] = {"limit": PAGE, "wait": WAIT}
                if iterator:
                    params["iterator"] = iterator
                try:
                    answer = session.get(poll_url, params=params, timeout=WAIT + 30)
                    answer.raise_for_status()
                except requests.RequestException as error:
                    problems.append(str(error))
                    time.sleep(0.5)
                    continue
                now = time.time()
                page = answer.json()
                for message in page["data"]:
                    arrived.setdefault(message["id"], now)
                iterator = page["iterator"]

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    try:
        yield arrived
    finally:
        stop.set()
        consumer.join(WAIT + 35)
        if problems:
            print(f"  pull: {len(problems)} failed polls, the first: {problems[0]}", flush=True)


def wait_for(arrived: dict[str, float], ids: set[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ids <= arrived.keys() and time.monotonic() < deadline:
        time.sleep(0.2)


def poll_endpoint(event_type: str) -> tuple[Any, str]:
    """The only active endpoint from now on: a polling endpoint, and its key."""
    from deliveries import services
    from deliveries.models import Endpoint, EndpointMode, EndpointState
    from deliveries.polling import services as polling

    Endpoint.objects.update(state=EndpointState.DISABLED)
    endpoint, _ = services.endpoint_create(url="", event_types=[event_type], mode=EndpointMode.POLL)
    return endpoint, polling.poll_key_issue(endpoint_id=endpoint.pk)


def write_backlog(endpoint: Any, event_type: str, count: int) -> None:
    """`count` events fanned out to `endpoint`, written in bulk (5,000 a transaction) with
    the deliveries fan-out makes (`new_delivery`): their consumer has not read them."""
    from django.db import transaction
    from django.utils import timezone

    from deliveries.models import Delivery, Event
    from deliveries.pipeline.fanout import new_delivery

    now = timezone.now()
    for start in range(0, count, 5000):
        with transaction.atomic():
            events = Event.objects.bulk_create(
                [
                    Event(
                        type=event_type,
                        occurred_at=now,
                        data={"n": n, "text": "x" * 200},
                        fanned_out_at=now,
                    )
                    for n in range(start, min(start + 5000, count))
                ]
            )
            Delivery.objects.bulk_create(
                [new_delivery(event_id=event.pk, endpoint=endpoint, now=now) for event in events]
            )


def run_pull(system: "OurSystem", args: argparse.Namespace, workdir: Path) -> Pull:
    """Both pull scenarios, on `system`'s database, through one `web` process."""
    from bench.ours import EVENT_TYPE

    out = Pull()
    size = BACKLOG["quick" if args.quick else "full"]
    with web(workdir / "pull-web.log") as base:
        endpoint, key = poll_endpoint(EVENT_TYPE)
        poll_url = f"{base}/api/v1/poll/{endpoint.pk}"
        print(f"ours: pull, a backlog of {size} read in pages of {PAGE}", flush=True)
        write_backlog(endpoint, EVENT_TYPE, size)
        out.backlog = read_backlog(poll_url, key, size, args.timeout)
        print(f"  {out.backlog} ({out.backlog.rate:.0f}/s)", flush=True)

        endpoint, key = poll_endpoint(EVENT_TYPE)
        poll_url = f"{base}/api/v1/poll/{endpoint.pk}"
        print(f"ours: pull, long polling, {args.rate:g}/s for {args.seconds:g}s", flush=True)
        with system.worker(), long_polling(poll_url, key) as arrived:
            committed = system.paced(args.rate, args.seconds)
            wait_for(arrived, set(committed), min(args.timeout, 120.0))
        ms = [(arrived[ref] - at) * 1000 for ref, at in committed.items() if ref in arrived]
        if ms:
            p50, p95, p99 = (percentile(ms, pct) for pct in (50, 95, 99))
        else:
            p50 = p95 = p99 = float("nan")
        out.latency = PullLatency(len(committed), len(ms), p50, p95, p99)
        print(f"  {out.latency}", flush=True)
    return out


def scenario(
    system: "OurSystem", args: argparse.Namespace, workdir: Path, push: "Measured"
) -> list[Row]:
    """`python -m bench`'s ``pull``: run it after push's scenarios, and its rows."""
    return pull_rows(args, run_pull(system, args, workdir), push)


def pull_rows(args: argparse.Namespace, pull: Pull, push: "Measured") -> list[Row]:
    """The pull rows of the table, each judged against push's row of the same run."""
    rows: list[Row] = []
    backlog = pull.backlog
    if backlog is not None:
        target, met = f">= {PUSH_RATIO:g}x push (run throughput too)", None
        if push.throughput is not None and push.throughput.rate > 0:
            ratio = backlog.rate / push.throughput.rate
            target = f"{ratio:.2f}x push's {push.throughput.rate:.0f}/s (>= {PUSH_RATIO:g}x)"
            met = ratio >= PUSH_RATIO
        rows.append(
            Row(
                f"pull: one consumer reads a backlog of {backlog.messages} in pages of "
                f"{PAGE}: messages/s",
                f"{backlog.rate:.0f}",
                "no pull",
                target,
                met,
            )
        )
    latency = pull.latency
    if latency is not None:
        target, met = f"<= {LATENCY_RATIO:g}x push's p50, p99 (run latency too)", None
        lat = push.latency
        if lat is not None and lat.p50 > 0 and lat.p99 > 0:
            ratios = (latency.p50 / lat.p50, latency.p99 / lat.p99)
            target = (
                f"{ratios[0]:.2f}x / {ratios[1]:.2f}x push's {lat.p50:.0f} / {lat.p99:.0f} "
                f"(<= {LATENCY_RATIO:g}x)"
            )
            met = max(ratios) <= LATENCY_RATIO and latency.arrived == latency.offered
        rows.append(
            Row(
                f"pull: long polling at {args.rate:g}/s for {args.seconds:g}s, "
                "commit->consumer p50 / p95 / p99 (ms)",
                f"{latency.p50:.0f} / {latency.p95:.0f} / {latency.p99:.0f}",
                "no pull",
                target,
                met,
            )
        )
        rows.append(
            Row(
                "pull: long polling, arrived / offered",
                f"{latency.arrived} / {latency.offered}",
                "",
                "all",
                latency.arrived == latency.offered,
            )
        )
    return rows
