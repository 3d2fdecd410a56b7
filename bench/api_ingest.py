"""The API door of `python -m bench` (scenario `api`): `POST /api/v1/events` beside the
writing view (`bench.anchor`) and a trivial view, in the same server, from the same clients.

The server is the Procfile's `web` line (gunicorn, gevent workers) on 127.0.0.1, started
once per number of web workers (1 and 2); each is measured from 4 and from 16 client
threads, one kept-alive connection each, one event per request. The three kinds of request
alternate in rounds, so that a change of load on a shared machine weighs on all alike: the
ratios are the figures to compare between runs.

One endpoint is subscribed. The door is measured with our workers stopped: on a 2-core
machine, fanning out and delivering each event at the same time would take the cores the
door is measured on, and in production the workers run in their own processes, most often
on their own machines. The workers then start and every accepted event must arrive. The
first configuration is measured a second time with the workers running, as production runs
them on one small machine: that run's ratio is shown beside the others, and the seconds
from each `202` to its arrival are kept.
"""

import contextlib
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.common import free_port, percentile, process, wait_for_port, web_command

if TYPE_CHECKING:
    import requests

    from bench.ours import OurSystem

EVENT_TYPE = "bench.load"
# (web workers, client threads): the first is the configuration whose arrivals are timed.
CONFIGURATIONS = ((2, 4), (2, 16), (1, 4), (1, 16))
# With the workers stopped each kind of request is sent this many times the events asked
# for, in ROUNDS rounds: rounds of a few hundred requests (a third of a second from 16
# clients) left the ratios to the machine's noise.
STOPPED_FACTOR = 4
ROUNDS = 6
TARGET_SHARE = 0.5  # of the writing view's requests/s
TARGET_P99_FACTOR = 2.0  # of the writing view's p99

WEB_ENV = {"DJANGO_SETTINGS_MODULE": "bench.settings"}


@dataclass
class Timed:
    """Requests/s and each request's seconds, summed over rounds."""

    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies, 99) * 1000 if self.latencies else 0.0


@dataclass
class DoorRun:
    workers: int
    clients: int
    api: Timed
    anchor: Timed
    trivial: Timed
    delivering: bool = False  # our workers ran (fanning out, delivering) on the same cores

    @property
    def share(self) -> float:
        return self.api.rate / self.anchor.rate if self.anchor.rate else 0.0

    @property
    def met(self) -> bool:
        return (
            self.share >= TARGET_SHARE and self.api.p99_ms <= TARGET_P99_FACTOR * self.anchor.p99_ms
        )


@dataclass
class ApiIngest:
    """Each configuration's figures, and each timed event's acceptance → arrival seconds."""

    runs: list[DoorRun]
    waits: list[float]
    accepted: int = 0  # events accepted with the workers stopped
    arrived: int = 0  # of those, the ones that arrived once the workers ran


def api_accept_rate(
    count: int,
    system: "OurSystem",
    receiver: Any,
    configurations: tuple[tuple[int, int], ...] = CONFIGURATIONS,
) -> ApiIngest:
    """To one endpoint at `receiver` (a `bench.scenarios.Receiver`): every configuration
    with our workers stopped (`STOPPED_FACTOR * count` requests of each kind), then the
    first one again with them running (`count`, each event timed to its arrival)."""
    from bench.scenarios import wait_arrivals

    path = "/ours/api"
    system.subscribe(receiver.url + path)
    runs: list[DoorRun] = []
    held: dict[str, float] = {}
    for workers, clients in configurations:
        print(f"  api: {workers} web workers, {clients} clients, workers stopped", flush=True)
        runs.append(_run(STOPPED_FACTOR * count, workers, clients, held))
    with system.worker():
        arrived = wait_arrivals(receiver, path, set(held), timeout=300)
        workers, clients = configurations[0]
        print(f"  api: {workers} web workers, {clients} clients, delivering", flush=True)
        accepted: dict[str, float] = {}
        run = _run(count, workers, clients, accepted, delivering=True)
        times = wait_arrivals(receiver, path, set(accepted), timeout=300)
    waits = sorted(min(each) - accepted[ref] for ref, each in times.items())
    return ApiIngest([*runs, run], waits, accepted=len(held), arrived=len(arrived))


def _run(
    count: int, workers: int, clients: int, accepted: dict[str, float], delivering: bool = False
) -> DoorRun:
    import requests

    from deliveries.models import ApiToken

    _, token = ApiToken.issue("bench")
    port = free_port()
    local = threading.local()

    def session() -> "requests.Session":
        # One kept-alive connection per client thread (a Session is not shared).
        if not hasattr(local, "session"):
            local.session = requests.Session()
            local.session.headers["Authorization"] = f"Bearer {token}"
        return local.session

    # The access log (the Procfile's, on stdout) is written, and dropped.
    web = web_command(port, workers)
    with process(web, extra_env=WEB_ENV, stdout=subprocess.DEVNULL):
        wait_for_port(port)
        base = f"http://127.0.0.1:{port}"
        kept: dict[str, Timed] = {"api": Timed(), "anchor": Timed(), "trivial": Timed()}

        def timed(kind: str, send: Callable[[int], None]) -> Callable[[int], None]:
            def call(n: int) -> None:
                started = time.perf_counter()
                send(n)
                kept[kind].latencies.append(time.perf_counter() - started)

            return call

        def post_event(n: int) -> None:
            answer = session().post(
                f"{base}/api/v1/events", json={"type": EVENT_TYPE, "data": {"n": n}}, timeout=10
            )
            answer.raise_for_status()
            if n >= 0:
                accepted[str(answer.json()["id"])] = time.time()

        def anchor(n: int) -> None:
            answer = session().post(f"{base}/bench/write", json={"n": n}, timeout=30)
            answer.raise_for_status()

        def trivial(n: int) -> None:
            session().post(f"{base}/bench/noop", json={"n": n}, timeout=30).raise_for_status()

        with ThreadPoolExecutor(max_workers=clients) as pool:
            # Warm-up, not timed: each worker's first requests import and connect.
            list(pool.map(trivial, range(50 * clients)))
            list(pool.map(anchor, range(10 * clients)))
            list(pool.map(post_event, [-1] * 10 * clients))
            for r in range(ROUNDS):
                share = count * (r + 1) // ROUNDS - count * r // ROUNDS
                for kind, send in (("trivial", trivial), ("anchor", anchor), ("api", post_event)):
                    size = share * (4 if kind == "trivial" else 1)
                    started = time.perf_counter()
                    list(pool.map(timed(kind, send), range(size)))
                    kept[kind].seconds += time.perf_counter() - started
    return DoorRun(workers, clients, kept["api"], kept["anchor"], kept["trivial"], delivering)


@contextlib.contextmanager
def api_session(name: str) -> Iterator[tuple["requests.Session", str]]:
    """The Procfile's `web` line (gunicorn, 2 gevent workers) serving our API on 127.0.0.1,
    and a `requests.Session` holding a new API token: yields (session, the API's base URL).
    Django must be set up (an `OurSystem` exists)."""
    import requests

    from deliveries.models import ApiToken

    _, token = ApiToken.issue(name)
    port = free_port()
    web = web_command(port)
    with process(web, extra_env=WEB_ENV, stdout=subprocess.DEVNULL), requests.Session() as api:
        wait_for_port(port)
        api.headers["Authorization"] = f"Bearer {token}"
        yield api, f"http://127.0.0.1:{port}/api/v1"
