"""The soak scenario (`python -m bench --scenarios soak`, docs/performance/benchmarks.md):
the Procfile's delivery process (gevent pool) under steady load for minutes while an
operator changes the endpoints through the HTTP API, then what must hold: no task met its
hard time limit, no delivery was sent twice at the same time, every event was delivered or
dead-lettered, and the delivery process's memory did not grow.

Events, one per transaction (`emit()`), come in `SOAK_GROUPS` types, each subscribed by
`ENDPOINTS / SOAK_GROUPS` endpoints, so that a rate of events makes the deliveries/s asked.
A tenth of the endpoints answer 500 to a share of requests (with few attempts, so that some
deliveries are dead-lettered) or slowly; the others at once. Each endpoint has a path of its
own (`/soak/<slot>/g<generation>`; an update changes the URL's query), and the receivers
log each request's arrival and answer times, so a delivery's overlapping requests show.
"""

import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import Row, run_paced
from bench.event_types import SOAK_GROUPS
from bench.scenarios import Receiver, rss_mb

if TYPE_CHECKING:
    import requests

    from bench.ours import OurSystem

ENDPOINTS = 50
# A tenth of the endpoints, each in a group of its own: two answer 500 to a share of
# requests, three answer after 300-500 ms.
FAILING, SLOW = (0, 1), (2, 3, 4)
SLOW_DELAY = (0.3, 0.5)
FAILING_MAX_ATTEMPTS = 3
OPERATOR_EVERY_SECONDS = 2.0
SUSPENDED_SECONDS = 10.0
RSS_EVERY_SECONDS = 5.0
RSS_AFTER_SECONDS = 120.0
RSS_MAX_GROWTH = 1.10
DRAIN_SECONDS = 300.0
# The Procfile's `worker` line (`CELERY_CONCURRENCY`), which fans the events out.
PROCFILE_WORKER_THREADS = 16
SOAK_TYPES = "bench.soak."

# A receiver by name, answering 500 to a share of requests, after a delay drawn between two.
ReceiverAt = Callable[[str, float, float, float], AbstractContextManager[Receiver]]


@dataclass
class Slot:
    """One of the soak's endpoints. The operator replaces it by a new endpoint (the next
    generation) when it deletes it, and changes its URL's query when it updates it."""

    number: int
    base: str
    options: dict[str, Any]
    generation: int = 0
    version: int = 0
    endpoint_id: str = ""
    suspended_at: float | None = None

    @property
    def path(self) -> str:
        return f"/soak/{self.number}/g{self.generation}"

    @property
    def url(self) -> str:
        return f"{self.base}{self.path}?v={self.version}"


class Operator:
    """Creates the endpoints through the HTTP API, then every few seconds changes one:
    updates its URL and headers, suspends it (and resumes it a little later), or deletes it
    and creates another in its place. Counts what the API did and keeps what it refused."""

    def __init__(self, api: "requests.Session", base: str, slots: list[Slot]) -> None:
        self.api, self.base, self.slots = api, base, slots
        self.done: Counter[str] = Counter()
        self.refused: list[str] = []
        # Every endpoint's path, the deleted ones' too.
        self.paths: dict[str, str] = {}
        self.draw = random.Random(41)

    def call(self, what: str, method: str, url: str, body: Any = None) -> dict[str, Any] | None:
        """The answer's JSON ({} without a body), or None when the API refused or failed."""
        import requests

        try:
            answer = self.api.request(method, url, json=body, timeout=30)
        except requests.RequestException as error:
            self.refused.append(f"{what}: {type(error).__name__}")
            return None
        if answer.status_code >= 300:
            self.refused.append(f"{what}: {answer.status_code} {answer.text[:200]}")
            return None
        self.done[what] += 1
        return answer.json() if answer.content else {}

    def create(self, slot: Slot) -> None:
        body = {
            "url": slot.url,
            "event_types": [f"{SOAK_TYPES}{slot.number % SOAK_GROUPS}"],
            "description": f"soak slot {slot.number}",
            **slot.options,
        }
        made = self.call("created", "POST", f"{self.base}/endpoints", body) or {}
        slot.endpoint_id = str(made.get("id", ""))
        if slot.endpoint_id:
            self.paths[slot.endpoint_id] = slot.path

    def change(self, slot: Slot, what: str, body: Any) -> bool:
        url = f"{self.base}/endpoints/{slot.endpoint_id}"
        return self.call(what, "PATCH", url, body) is not None

    def step(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            if slot.suspended_at is not None and now - slot.suspended_at > SUSPENDED_SECONDS:
                self.change(slot, "resumed", {"state": "active"})
                slot.suspended_at = None
                return
        slot = self.draw.choice([slot for slot in self.slots if slot.suspended_at is None])
        if not slot.endpoint_id:  # its creation was refused: again
            self.create(slot)
            return
        action = self.draw.choices(("update", "suspend", "replace"), weights=(2, 1, 1))[0]
        if action == "update":
            slot.version += 1
            headers = {"X-Soak-Version": str(slot.version)}
            self.change(slot, "updated", {"url": slot.url, "custom_headers": headers})
        elif action == "suspend":
            if self.change(slot, "suspended", {"state": "suspended"}):
                slot.suspended_at = now
        elif (
            self.call("deleted", "DELETE", f"{self.base}/endpoints/{slot.endpoint_id}") is not None
        ):
            slot.generation, slot.version = slot.generation + 1, 0
            self.create(slot)

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(OPERATOR_EVERY_SECONDS):
            self.step()
        # What is still suspended is resumed, so its held deliveries are sent.
        for slot in self.slots:
            if slot.suspended_at is not None:
                self.change(slot, "resumed", {"state": "active"})
                slot.suspended_at = None


@dataclass
class Soak:
    minutes: float
    asked_rate: float  # deliveries/s asked
    events: int
    rate: float  # deliveries answered 200 a second during the load
    operations: dict[str, int]
    refused: list[str]
    hard_limit_lines: int
    soft_limit_lines: int
    requests: int
    overlapping: int  # requests that came while the same delivery's earlier one was open
    sent_again: int  # requests that came after the same delivery's earlier one was answered
    open_events: int  # neither delivered nor dead-lettered after the drain
    statuses: dict[str, int]
    not_received: int  # recorded as succeeded, never answered 200 by the receiver
    seconds: float  # of load
    drained: float | None  # seconds the drain took; None when it ran out
    rss: list[tuple[float, float]] = field(default_factory=list)  # (seconds into it, MB)

    def rss_growth(self) -> tuple[float, float, float] | None:
        """(when the base was taken, base MB, last MB): the base is the first sample after
        `RSS_AFTER_SECONDS` (half the load in a shorter run)."""
        after = min(RSS_AFTER_SECONDS, self.seconds / 2)
        later = [(at, mb) for at, mb in self.rss if at >= after]
        if not later:
            return None
        return later[0][0], later[0][1], later[-1][1]


def time_limit_lines(log: str) -> tuple[int, int]:
    """Lines of a Celery worker's log that tell of a hard time limit (Celery's "Hard time
    limit (...s) exceeded" and the task's `TimeLimitExceeded`), and of a soft one."""
    hard = soft = 0
    for line in log.splitlines():
        if "Hard time limit" in line or "TimeLimitExceeded" in line.replace("SoftTime", ""):
            hard += 1
        elif "Soft time limit" in line or "SoftTimeLimitExceeded" in line:
            soft += 1
    return hard, soft


def concurrent_sends(lines: Iterable[str]) -> tuple[int, int, int]:
    """From the receivers' logs (`bench.peer`: answer time, path, event id, status, request
    time): requests, those that came while an earlier request of the same delivery (event
    id at one endpoint: the path without its query) was still unanswered, and those that
    came after it was answered (retries, as they should be)."""
    spans: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for line in lines:
        parts = line.split()
        if len(parts) == 5:
            delivery = (parts[1].split("?", 1)[0], parts[2])
            spans[delivery].append((float(parts[4]), float(parts[0])))
    requests = overlapping = again = 0
    for each in spans.values():
        each.sort()
        requests += len(each)
        open_until = each[0][1]
        for began, answered in each[1:]:
            if began < open_until:
                overlapping += 1
            else:
                again += 1
            open_until = max(open_until, answered)
    return requests, overlapping, again


def soak_rows(soak: Soak) -> list[Row]:
    """The soak's rows of the bench table, each against its target."""
    bad = len(FAILING) + len(SLOW)
    ops = soak.operations
    done = " / ".join(
        str(ops.get(what, 0)) for what in ("created", "updated", "suspended", "resumed", "deleted")
    )
    statuses = soak.statuses
    rows = [
        Row(
            f"soak, {soak.minutes:g} min over {ENDPOINTS} endpoints ({bad} answering 500 or "
            "slowly): deliveries/s answered 200 (events)",
            f"{soak.rate:.0f} ({soak.events})",
            "",
            f"{soak.asked_rate:g}/s asked",
        ),
        Row(
            "soak: operator's API calls, created / updated / suspended / resumed / deleted",
            done + (f"; {len(soak.refused)} refused" if soak.refused else ""),
            "",
            "none refused",
            not soak.refused,
        ),
        Row(
            "soak: hard time-limit lines in the delivery process's log (soft)",
            f"{soak.hard_limit_lines} ({soak.soft_limit_lines})",
            "",
            "0",
            soak.hard_limit_lines == 0,
        ),
        Row(
            "soak: deliveries sent twice at the same time (requests; sent again after an answer)",
            f"{soak.overlapping} ({soak.requests}; {soak.sent_again})",
            "",
            "0",
            soak.overlapping == 0,
        ),
        Row(
            "soak: events neither delivered nor dead-lettered after the drain "
            "(deliveries succeeded / dead-lettered; drain)",
            f"{soak.open_events} of {soak.events} ({statuses.get('succeeded', 0)} / "
            f"{statuses.get('dead_lettered', 0)}; "
            + (f"{soak.drained:.0f} s)" if soak.drained is not None else "not over)"),
            "",
            f"0, drained within {DRAIN_SECONDS:.0f} s",
            soak.open_events == 0 and soak.drained is not None,
        ),
        Row(
            "soak: deliveries recorded as succeeded that the receiver never answered 200",
            str(soak.not_received),
            "",
            "0",
            soak.not_received == 0,
        ),
    ]
    growth = soak.rss_growth()
    peak = max((mb for _, mb in soak.rss), default=0.0)
    rows.append(
        Row(
            "soak: delivery process RSS "
            + (f"at {growth[0] / 60:.0f} min -> end (MB)" if growth else "(MB)"),
            f"{growth[1]:.0f} -> {growth[2]:.0f} ({growth[2] / growth[1]:.2f}x; peak {peak:.0f})"
            if growth
            else "no figure",
            "",
            f"<= {RSS_MAX_GROWTH:.2f}x",
            growth is not None and growth[2] <= RSS_MAX_GROWTH * growth[1],
        )
    )
    return rows


def soak(
    system: "OurSystem",
    receivers: ReceiverAt,
    workdir: Path,
    *,
    minutes: float,
    rate: float,
    fail_rate: float,
) -> Soak:
    """`minutes` of `rate` deliveries/s asked (events one per transaction) over `ENDPOINTS`
    endpoints while the operator changes them, then a drain of at most `DRAIN_SECONDS`
    until no delivery waits; what the delivery process logged, what the receivers saw and
    what the database holds after it."""
    from django.db import connections, transaction

    from bench.api_ingest import api_session
    from deliveries import services

    seconds, log = minutes * 60, workdir / "soak-delivery.log"
    per_event = ENDPOINTS / SOAK_GROUPS
    with (
        receivers("soak-healthy", 0.0, 0.0, 0.0) as healthy,
        receivers("soak-failing", fail_rate, 0.0, 0.0) as failing,
        receivers("soak-slow", 0.0, *SLOW_DELAY) as slow,
        api_session("bench-soak") as (api, base),
        system.worker(log=log, others=PROCFILE_WORKER_THREADS) as pid,
    ):
        slots = [
            Slot(n, *_behaviour(n, healthy, failing, slow, system.retry_scale))
            for n in range(ENDPOINTS)
        ]
        operator = Operator(api, base, slots)
        for slot in slots:
            operator.create(slot)

        def emit_one(n: int) -> str:
            with transaction.atomic():
                data = {"n": n, "text": "x" * 200}
                return str(services.emit(f"{SOAK_TYPES}{n % SOAK_GROUPS}", data).id)

        stop, rss = threading.Event(), list[tuple[float, float]]()
        began = time.time()
        helpers = [
            threading.Thread(target=operator.run, args=(stop,)),
            threading.Thread(target=_sample_rss, args=(pid, stop, rss, operator)),
        ]
        for helper in helpers:
            helper.start()
        try:
            committed = run_paced(
                rate / per_event, seconds, emit_one, on_lane_exit=connections.close_all
            )
        finally:
            stop.set()
            for helper in helpers:
                helper.join()
        ended = time.time()
        print(f"soak: load over, {len(committed)} events; draining", flush=True)
        drained = _drain(DRAIN_SECONDS)
        statuses, open_events, succeeded = _recorded()
    for refusal, times in Counter(operator.refused).most_common(5):
        print(f"soak: the API refused {times}x: {refusal}", flush=True)
    hard, soft = time_limit_lines(log.read_text(errors="replace"))
    lines = [
        line for each in (healthy, failing, slow) for line in each.log.read_text().splitlines()
    ]
    requests, overlapping, again = concurrent_sends(lines)
    answered, during = _answered(lines, began, ended)
    not_received = sum(
        (operator.paths.get(endpoint, ""), event) not in answered for endpoint, event in succeeded
    )
    return Soak(
        minutes=minutes,
        asked_rate=rate,
        events=len(committed),
        rate=during / (ended - began),
        operations=dict(operator.done),
        refused=operator.refused,
        hard_limit_lines=hard,
        soft_limit_lines=soft,
        requests=requests,
        overlapping=overlapping,
        sent_again=again,
        open_events=open_events,
        statuses=statuses,
        not_received=not_received,
        seconds=ended - began,
        drained=drained,
        rss=rss,
    )


def _answered(lines: list[str], began: float, ended: float) -> tuple[set[tuple[str, str]], int]:
    """The deliveries (endpoint path, event id) the receivers answered 200, and how many 200s
    they answered from `began` to `ended`."""
    answered, during = set(), 0
    for line in lines:
        parts = line.split()
        if len(parts) == 5 and parts[3] == "200":
            answered.add((parts[1].split("?", 1)[0], parts[2]))
            during += began <= float(parts[0]) <= ended
    return answered, during


def _behaviour(
    n: int, healthy: Receiver, failing: Receiver, slow: Receiver, scale: float
) -> tuple[str, dict[str, Any]]:
    """A slot's receiver and endpoint options: the product's retry delays times `scale`,
    as the other scenarios', and few attempts where it answers 500."""
    from bench.ours import (
        DEFAULT_BACKOFF_BASE_SECONDS,
        DEFAULT_BACKOFF_MAX_SECONDS,
        DEFAULT_RETRY_WINDOW_SECONDS,
    )

    options: dict[str, Any] = {
        "backoff_base_seconds": DEFAULT_BACKOFF_BASE_SECONDS * scale,
        "backoff_max_seconds": DEFAULT_BACKOFF_MAX_SECONDS * scale,
        "retry_window_seconds": DEFAULT_RETRY_WINDOW_SECONDS * scale,
    }
    if n in FAILING:
        return failing.url, {**options, "max_attempts": FAILING_MAX_ATTEMPTS}
    return (slow if n in SLOW else healthy).url, options


def _sample_rss(
    pid: int, stop: threading.Event, into: list[tuple[float, float]], operator: Operator
) -> None:
    """The delivery process's RSS every `RSS_EVERY_SECONDS`, and a line a minute."""
    began, said = time.monotonic(), 0
    while not stop.wait(RSS_EVERY_SECONDS):
        at = time.monotonic() - began
        into.append((at, rss_mb(pid)))
        if at // 60 > said:
            said = int(at // 60)
            print(
                f"soak: {said} min, delivery process {into[-1][1]:.0f} MB, operator "
                f"{dict(operator.done)}, {len(operator.refused)} refused",
                flush=True,
            )


def _drain(limit: float) -> float | None:
    """Until no event of the soak waits for its fan-out and none of its deliveries waits
    to be sent: how long that took, or None when `limit` seconds were not enough."""
    from deliveries.models import Delivery, DeliveryStatus, Event

    waiting = [DeliveryStatus.PENDING, DeliveryStatus.SENDING, DeliveryStatus.HELD]
    began = time.monotonic()
    while time.monotonic() < began + limit:
        unfanned = Event.objects.filter(type__startswith=SOAK_TYPES, fanned_out_at=None)
        pending = Delivery.objects.filter(event__type__startswith=SOAK_TYPES, status__in=waiting)
        if not unfanned.exists() and not pending.exists():
            return time.monotonic() - began
        time.sleep(2.0)
    print(f"soak: deliveries still waiting after a drain of {limit:.0f} s", flush=True)
    return None


def _recorded() -> tuple[dict[str, int], int, list[tuple[str, str]]]:
    """The soak's deliveries by status (a deleted endpoint's went with it), the events not
    all of whose deliveries succeeded or were dead-lettered (or not fanned out), and the
    succeeded deliveries as (endpoint id, event id)."""
    from django.db.models import Count

    from deliveries.models import Delivery, DeliveryStatus, Event

    ours = Delivery.objects.filter(event__type__startswith=SOAK_TYPES)
    statuses = dict(ours.values_list("status").annotate(n=Count("id")).order_by())
    done = [DeliveryStatus.SUCCEEDED, DeliveryStatus.DEAD_LETTERED]
    open_events = ours.exclude(status__in=done).values("event_id").distinct().count()
    open_events += Event.objects.filter(type__startswith=SOAK_TYPES, fanned_out_at=None).count()
    succeeded = [
        (str(endpoint), str(event))
        for endpoint, event in ours.filter(status=DeliveryStatus.SUCCEEDED)
        .values_list("endpoint_id", "event_id")
        .iterator(chunk_size=5000)
    ]
    return statuses, open_events, succeeded
