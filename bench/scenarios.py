"""The benchmark's scenarios (docs/performance/benchmarks.md), written once for both systems
(`bench.ours.OurSystem` and `bench.peer_side.PeerSystem`): each subscribes one
endpoint/webhook on the shared receiver (`bench.peer`, one path per system and scenario),
drives load and reads what arrived from the receiver's log. Every wait is bounded by
`timeout`; what has not arrived by then is lost."""

import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import redis

from bench.common import free_port, percentile


class System(Protocol):
    name: str
    emit_seconds: float  # how long the last `emit` took

    def subscribe(self, url: str) -> None: ...
    def subscribe_many(self, urls: list[str]) -> None: ...
    def emit(self, count: int, per_transaction: int) -> dict[str, float]: ...
    def paced(self, rate: float, seconds: float) -> dict[str, float]: ...
    def recorded(self, ids: list[str]) -> tuple[int, int, int]: ...
    def rollback(self, count: int) -> list[str]: ...
    def park(self, count: int, low: float, high: float) -> None: ...
    def worker(self) -> AbstractContextManager[int]: ...


class OrderedSystem(System, Protocol):
    """A system with ordered delivery (ours)."""

    def subscribe_ordered(self, url: str) -> None: ...
    def emit_keyed(self, count: int, keys: int) -> list[tuple[str, int]]: ...


@dataclass
class Receiver:
    """A running `bench.peer`: its base URL and its arrival log."""

    url: str
    log: Path


def read_arrivals(log: Path) -> dict[tuple[str, str], list[float]]:
    """Times of the 2xx answers per (path, event id); 500s answered by a flaky receiver and
    the ceiling's own requests do not count."""
    arrivals: dict[tuple[str, str], list[float]] = defaultdict(list)
    if not log.exists():
        return arrivals
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[3] == "200" and parts[2] != "ceiling":
            arrivals[(parts[1], parts[2])].append(float(parts[0]))
    return arrivals


def wait_arrivals(
    receiver: Receiver, path: str, ids: set[str], timeout: float, quiet: float | None = None
) -> dict[str, list[float]]:
    """Arrival times per event id at `path`, once all `ids` arrived, at the timeout, or
    (with `quiet`) once nothing new arrived for that long: a sender that gave up on some
    events (django-webhook drops an event after 6 attempts) would otherwise hold the run
    until the timeout."""
    deadline = time.monotonic() + timeout
    seen, changed_at = -1, time.monotonic()
    while True:
        arrived = {
            hook_id: times
            for (at_path, hook_id), times in read_arrivals(receiver.log).items()
            if at_path == path and hook_id in ids
        }
        now = time.monotonic()
        if len(arrived) != seen:
            seen, changed_at = len(arrived), now
        settled = quiet is not None and now - changed_at > quiet
        if len(arrived) >= len(ids) or now > deadline or settled:
            return arrived
        time.sleep(0.5)


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (a prefork pool), in MB."""
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


@contextlib.contextmanager
def peak_rss(pid: int, every: float = 0.2) -> Iterator[list[float]]:
    """Samples the process's RSS while the block runs; the list holds the peak afterwards."""
    peak = [rss_mb(pid)]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(every):
            peak[0] = max(peak[0], rss_mb(pid))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()


@dataclass
class Throughput:
    count: int
    emit_rate: float
    arrived: int
    rate: float
    recorded: tuple[int, int, int]


def throughput(
    system: System, receiver: Receiver, count: int, timeout: float, per_transaction: int = 100
) -> Throughput:
    path = f"/{system.name}/throughput"
    system.subscribe(receiver.url + path)
    committed = system.emit(count, per_transaction)
    emit_rate = count / system.emit_seconds if system.emit_seconds else 0.0
    arrived = wait_arrivals(receiver, path, set(committed), timeout)
    first_arrivals = [min(times) for times in arrived.values()]
    span = max(first_arrivals, default=0.0) - min(committed.values())
    # Attempts are stored right after the answer; give the last few a moment.
    deadline = time.monotonic() + 30
    recorded = system.recorded(list(committed))
    while min(recorded) < len(arrived) and time.monotonic() < deadline:
        time.sleep(0.5)
        recorded = system.recorded(list(committed))
    rate = len(arrived) / span if span > 0 else 0.0
    return Throughput(count, emit_rate, len(arrived), rate, recorded)


@dataclass
class Slow:
    endpoints: int
    events: int
    arrived: int
    rate: float
    # Requests the receiver had in flight on average: rate x its answer delay.
    in_flight: float
    per_transaction: int = 100
    # Task messages published to the broker (all queues: LPUSH and RPUSH as Redis counts
    # them) per delivery; None when the broker's counters could not be read.
    messages_per_delivery: float | None = None
    # The events were POSTed to the API one per request (per_transaction is then 1).
    through_api: bool = False


def broker_pushes(url: str | None) -> int | None:
    """LPUSH + RPUSH calls the broker's Redis has served (all clients)."""
    if not url:
        return None
    try:
        stats = redis.Redis.from_url(url).info("commandstats")
    except redis.RedisError:
        return None
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("lpush", "rpush"))


def slow(
    system: System,
    receiver: Receiver,
    endpoints: int,
    events: int,
    delay: float,
    timeout: float,
    per_transaction: int = 100,
    post: Callable[[int], tuple[float, dict[str, float]]] | None = None,
) -> Slow:
    """`events` events (`per_transaction` per transaction, or with `post` one per request
    to our API) to `endpoints` endpoints of a receiver that answers each request after
    `delay` seconds: deliveries/s from the first commit (the first POST) to the last
    arrival, when the bound is concurrency, not CPU; and the task messages each delivery
    cost (on a broker of its own the count is exact)."""
    kind = "api" if post else f"{per_transaction}"
    base = f"/{system.name}/slow{endpoints}x{kind}"
    paths = [f"{base}/{n}" for n in range(endpoints)]
    system.subscribe_many([receiver.url + path for path in paths])
    broker = getattr(system, "broker_url", None)
    pushes_before = broker_pushes(broker)
    if post is None:
        committed = system.emit(events, per_transaction)
        first = min(committed.values())
    else:
        first, committed = post(events)
    expected = {(path, event_id) for path in paths for event_id in committed}
    deadline = time.monotonic() + timeout
    while True:
        arrived = {
            key: times for key, times in read_arrivals(receiver.log).items() if key in expected
        }
        if len(arrived) >= len(expected) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    last = max((min(times) for times in arrived.values()), default=0.0)
    span = last - first
    rate = len(arrived) / span if span > 0 else 0.0
    pushes_after = broker_pushes(broker)
    per_delivery = None
    if pushes_before is not None and pushes_after is not None and arrived:
        per_delivery = (pushes_after - pushes_before) / len(arrived)
    return Slow(
        endpoints,
        events,
        len(arrived),
        rate,
        rate * delay,
        1 if post else per_transaction,
        per_delivery,
        through_api=post is not None,
    )


@dataclass
class Ordered:
    events: int
    keys: int
    arrived: int
    # Task messages published to the broker (all queues) per delivery.
    messages_per_delivery: float | None
    # Every key's events arrived in the order they were emitted.
    in_order: bool


def ordered(
    system: OrderedSystem, receiver: Receiver, events: int, keys: int, timeout: float
) -> Ordered:
    """An ordered endpoint with an in-flight limit of 1, kept busy by `events` events over
    `keys` ordering keys (one per transaction, emitted at once) at a receiver that answers
    after its delay: the task messages each delivery cost, and whether every key's events
    arrived in order (their arrival times, the first of each)."""
    path = f"/{system.name}/ordered{events}x{keys}"
    system.subscribe_ordered(receiver.url + path)
    broker = getattr(system, "broker_url", None)
    pushes_before = broker_pushes(broker)
    committed = system.emit_keyed(events, keys)
    arrived = wait_arrivals(receiver, path, {event_id for event_id, _ in committed}, timeout)
    pushes_after = broker_pushes(broker)
    per_delivery = None
    if pushes_before is not None and pushes_after is not None and arrived:
        per_delivery = (pushes_after - pushes_before) / len(arrived)
    in_order = True
    for key in range(keys):
        line = [event_id for event_id, k in committed if k == key]
        times = [min(arrived[event_id]) for event_id in line if event_id in arrived]
        in_order = in_order and times == sorted(times)
    return Ordered(events, keys, len(arrived), per_delivery, in_order)


@dataclass
class Latency:
    offered: int
    arrived: int
    p50: float
    p95: float
    p99: float
    # Events/s the emitting loop achieved: below the asked rate when a commit is too slow.
    achieved_rate: float = 0.0


def latency(
    system: System, receiver: Receiver, rate: float, seconds: float, timeout: float
) -> Latency:
    path = f"/{system.name}/latency"
    system.subscribe(receiver.url + path)
    committed = system.paced(rate, seconds)
    arrived = wait_arrivals(receiver, path, set(committed), timeout)
    ms = [(min(times) - committed[hook_id]) * 1000 for hook_id, times in arrived.items()]
    span = max(committed.values(), default=0.0) - min(committed.values(), default=0.0)
    achieved = (len(committed) - 1) / span if span > 0 else 0.0
    if not ms:
        nan = float("nan")
        return Latency(len(committed), 0, nan, nan, nan, achieved)
    return Latency(
        len(committed),
        len(arrived),
        percentile(ms, 50),
        percentile(ms, 95),
        percentile(ms, 99),
        achieved,
    )


@dataclass
class Flaky:
    count: int
    arrived: int
    seconds_to_last: float
    recorded: tuple[int, int, int]


def flaky(
    system: System, receiver: Receiver, count: int, timeout: float, quiet: float = 60.0
) -> Flaky:
    """Events to a receiver answering 500 to a share of requests; the wait ends when all
    arrived, at `timeout`, or after `quiet` seconds without a new arrival (longer than
    either scaled retry delay); what is missing then counts as lost."""
    path = f"/{system.name}/flaky"
    system.subscribe(receiver.url + path)
    committed = system.emit(count, 100)
    arrived = wait_arrivals(receiver, path, set(committed), timeout, quiet)
    last = max((min(times) for times in arrived.values()), default=float("nan"))
    return Flaky(
        count, len(arrived), last - min(committed.values()), system.recorded(list(committed))
    )


def rollback(system: System, receiver: Receiver, count: int, wait: float) -> int:
    """Webhooks that arrive for events whose transaction rolled back (should be none)."""
    path = f"/{system.name}/rollback"
    system.subscribe(receiver.url + path)
    ids = set(system.rollback(count))
    time.sleep(wait)
    return len(wait_arrivals(receiver, path, ids, timeout=0))


@dataclass
class Refused:
    count: int
    arrived: int
    seconds_down: float
    seconds_after_back: float  # to the last arrival


def refused(
    system: System,
    receiver_at: Callable[[int], AbstractContextManager[Receiver]],
    count: int,
    seconds_down: float,
    timeout: float,
) -> Refused:
    """Events to an endpoint whose port refuses connections for `seconds_down`, then a
    receiver starts on that port: how many arrive once it is back (all should)."""
    port = free_port()
    path = f"/{system.name}/refused"
    system.subscribe(f"http://127.0.0.1:{port}{path}")
    committed = system.emit(count, count)
    time.sleep(seconds_down)
    with receiver_at(port) as back:
        back_at = time.time()
        arrived = wait_arrivals(back, path, set(committed), timeout)
    last = max((min(times) for times in arrived.values()), default=float("nan"))
    return Refused(count, len(arrived), seconds_down, last - back_at)


@dataclass
class Memory:
    waiting: int
    idle: float
    peak: float

    @property
    def ratio(self) -> float:
        return self.peak / self.idle if self.idle else float("nan")


def memory(system: System, receiver: Receiver, waiting: int, seconds: float) -> Memory:
    """Worker RSS idle, then its peak while `waiting` deliveries wait for a retry due over the
    next hour (a few fall due during the run and are sent) and the sweeper runs."""
    system.subscribe(f"{receiver.url}/{system.name}/waiting")
    with system.worker() as pid:
        time.sleep(2.0)
        idle = rss_mb(pid)
        with peak_rss(pid) as peak:
            system.park(waiting, 10.0, 3600.0)
            time.sleep(seconds)
    return Memory(waiting, idle, peak[0])


@dataclass
class Measured:
    """What one system measured; None where a scenario was not run."""

    throughput: Throughput | None = None
    slow: list[Slow] = field(default_factory=list)
    ordered: Ordered | None = None
    latency: Latency | None = None
    flaky: Flaky | None = None
    rollback: int | None = None
    refused: Refused | None = None
    memory: Memory | None = None
