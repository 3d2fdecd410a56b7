"""Benchmarks, ours beside the peer django-webhook: `make bench` (`python -m bench`); the
results and what they mean are in docs/performance/benchmarks.md.

Starts what it needs on 127.0.0.1 (fresh PostgreSQL databases, a Redis database, the fast
receiver `bench.peer`, Celery workers), runs the chosen scenarios against our project and,
with --peer, against django-webhook 0.0.15 in its own virtualenv, then runs the isolation and
receiving benchmarks as their own processes, and prints one table:
measure | ours | peer | ratio / target | met?

Every wait is bounded (--timeout per scenario); `--quick` is a smoke run with small sizes.
"""

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import requests

from bench import pull, scenarios
from bench.common import Row, free_port, process, side_by_side, wait_for_port
from bench.external import external_rows, run_external
from bench.scenarios import Measured, Receiver, System

if TYPE_CHECKING:
    from bench.api_ingest import ApiIngest
    from bench.emit_cost import EmitCost
    from bench.soak import Soak

SCENARIOS = (
    "ceilings",
    "throughput",
    "slow",
    "slow-api",
    "ordered",
    "api",
    "emit-row",
    "latency",
    "flaky",
    "rollback",
    "refused",
    "memory",
    "pull",
)
EXTERNAL = ("isolation", "receiving", "filters")
# Run only when named: 15 minutes of load (`bench.soak`).
SOAK = "soak"
# A full run's sizes (those the published figures were measured with), and a smoke run's.
FULL = {
    "events": 10_000,
    "rate": 100.0,
    "seconds": 60.0,
    "flaky_events": 3_000,
    "waiting": 100_000,
    "memory_seconds": 60.0,
    "isolation_rate": 20.0,
    "isolation_seconds": 20.0,
    "receiving_events": 10_000,
    "receiving_burst": 20_000,
    "api_events": 500,
    "slow": "20x100,200x50",
    "soak_minutes": 15.0,
}
QUICK = {
    "events": 300,
    "rate": 20.0,
    "seconds": 5.0,
    "flaky_events": 200,
    "waiting": 5_000,
    "memory_seconds": 15.0,
    "isolation_rate": 5.0,
    "isolation_seconds": 5.0,
    "receiving_events": 300,
    "receiving_burst": 500,
    "api_events": 100,
    "slow": "20x20,50x20",
    "soak_minutes": 3.0,
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    every = ",".join(SCENARIOS + EXTERNAL)
    parser.add_argument(
        "--scenarios",
        default=every,
        help=f"comma-separated, of: {every} [all], and {SOAK} (only when named)",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    peer = parser.add_mutually_exclusive_group()
    peer.add_argument(
        "--peer", dest="peer", action="store_true", default=True, help="run the peer (default)"
    )
    peer.add_argument("--no-peer", dest="peer", action="store_false", help="ours only")
    sizes = parser.add_argument_group("sizes [full run; --quick]")
    for name, kind, what in (
        ("events", int, "throughput: events"),
        ("rate", float, "latency: events/s offered"),
        ("seconds", float, "latency: for how long"),
        ("flaky_events", int, "events to the receiver answering 500s"),
        ("waiting", int, "memory: retries waiting"),
        ("memory_seconds", float, "memory: how long the worker runs over them"),
        ("isolation_rate", float, "python -m bench.isolation --rate"),
        ("isolation_seconds", float, "python -m bench.isolation --seconds"),
        ("receiving_events", int, "python -m bench.receiving --events and --noop-requests"),
        ("receiving_burst", int, "python -m bench.receiving --burst (from 32 connections)"),
        ("api_events", int, "ours: events POSTed to the API"),
        ("slow", str, "slow receiver: ENDPOINTSxEVENTS runs, comma-separated"),
        ("soak_minutes", float, "soak: minutes of steady load"),
    ):
        full, quick = FULL[name], QUICK[name]
        shown = f"{full}; {quick}" if isinstance(full, str) else f"{full:g}; {quick:g}"
        sizes.add_argument("--" + name.replace("_", "-"), type=kind, help=f"{what} [{shown}]")
    parser.add_argument(
        "--slow-delay", type=float, default=0.2, help="slow receiver: answer delay [0.2 s]"
    )
    parser.add_argument("--fail-rate", type=float, default=0.3, help="share of 500s [0.3]")
    parser.add_argument(
        "--soak-rate", type=float, default=200.0, help="soak: deliveries/s asked [200]"
    )
    parser.add_argument(
        "--retry-scale",
        type=float,
        default=0.01,
        help="every retry delay times this, for both (ours: 10 s base, 900 s max, 24 h "
        "window; django-webhook: a fixed 60 s) [0.01]",
    )
    parser.add_argument("--pool", default="threads", help="the peer's worker pool [threads]")
    parser.add_argument("--concurrency", type=int, default=16, help="the peer's worker [16]")
    parser.add_argument(
        "--ours-pool",
        default="gevent",
        help="our worker's pool, as the Procfile's delivery worker [gevent]",
    )
    parser.add_argument("--ours-concurrency", type=int, default=200, help="our worker [200]")
    parser.add_argument(
        "--ours-db-pool",
        type=int,
        default=10,
        help="our worker's pooled database connections (DATABASE_POOL_MAX_SIZE; 0: none) [10]",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="limit of each wait [1800 s]")
    args = parser.parse_args()
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.chosen = [name.strip() for name in args.scenarios.split(",") if name.strip()]
    unknown = set(args.chosen) - {*SCENARIOS, *EXTERNAL, SOAK}
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    try:
        args.slow_runs = [
            tuple(int(n) for n in run.lower().split("x", 1))
            for run in args.slow.split(",")
            if run.strip()
        ]
    except ValueError:
        parser.error("--slow takes ENDPOINTSxEVENTS[,ENDPOINTSxEVENTS...], e.g. 20x100")
    if not 0 <= args.fail_rate < 1:
        parser.error("--fail-rate must be in [0, 1)")
    return args


@contextmanager
def receiver(
    workdir: Path,
    name: str,
    fail_rate: float = 0.0,
    port: int | None = None,
    delay: float = 0.0,
    max_delay: float = 0.0,
) -> Iterator[Receiver]:
    """A `bench.peer`; with `max_delay`, each answer's delay is drawn from `delay` to it."""
    port, log = port or free_port(), workdir / f"{name}.log"
    command = [sys.executable, "-m", "bench.peer", str(port), str(log), str(fail_rate)]
    command += ["1", str(delay), str(max(delay, max_delay))]
    with process(command):
        wait_for_port(port)
        yield Receiver(f"http://127.0.0.1:{port}", log)


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


def run_system(
    system: System,
    healthy: Receiver,
    failing: Receiver,
    slow: Receiver,
    args: argparse.Namespace,
    out: Measured,
) -> Measured:
    """The scenarios that need a worker, then memory with a fresh one. `out` fills as they
    end, so what was measured before a failure is kept."""
    chosen = set(args.chosen)
    print(f"\n== {system.name}", flush=True)
    if chosen & {
        "throughput",
        "slow",
        "slow-api",
        "ordered",
        "latency",
        "flaky",
        "rollback",
        "refused",
    }:
        with system.worker():
            if "throughput" in chosen:
                print(f"{system.name}: throughput, {args.events} events", flush=True)
                out.throughput = scenarios.throughput(system, healthy, args.events, args.timeout)

            def slow_run(endpoints: int, events: int, sent: str, **how: Any) -> None:
                print(
                    f"{system.name}: slow receiver ({args.slow_delay * 1000:g} ms), "
                    f"{endpoints} endpoints x {events} events, {sent}",
                    flush=True,
                )
                out.slow.append(
                    scenarios.slow(
                        system, slow, endpoints, events, args.slow_delay, args.timeout, **how
                    )
                )

            for endpoints, events in args.slow_runs if "slow" in chosen else []:
                for per_transaction in (100, 1):
                    slow_run(
                        endpoints,
                        events,
                        f"{per_transaction} per transaction",
                        per_transaction=per_transaction,
                    )
            if "slow-api" in chosen and system.name == "ours":
                # From outside: the Procfile's web line, one client, one event per request.
                from bench.ours import api_poster

                with api_poster() as post:
                    for endpoints, events in args.slow_runs:
                        slow_run(endpoints, events, "one per API request", post=post)
            if "ordered" in chosen and system.name == "ours":
                # (django-webhook has no ordered delivery.)
                print(f"{system.name}: ordered endpoint, 60 events over 6 keys", flush=True)
                ordered_system = cast(scenarios.OrderedSystem, system)
                out.ordered = scenarios.ordered(ordered_system, slow, 60, 6, args.timeout)
            if "latency" in chosen:
                print(f"{system.name}: latency, {args.rate:g}/s for {args.seconds:g}s", flush=True)
                out.latency = scenarios.latency(
                    system, healthy, args.rate, args.seconds, args.timeout
                )
            if "flaky" in chosen:
                print(f"{system.name}: {args.fail_rate:.0%} of answers 500", flush=True)
                # Quiet for 60 s: longer than any retry delay at the default scale (ours
                # 900 s x 0.01, django-webhook 60 s x 0.01), or 2x the longest one.
                quiet = max(60.0, 2 * 900 * args.retry_scale)
                out.flaky = scenarios.flaky(system, failing, args.flaky_events, args.timeout, quiet)
            if "rollback" in chosen:
                print(f"{system.name}: rolled-back transaction", flush=True)
                out.rollback = scenarios.rollback(system, healthy, 100, wait=5.0)
            if "refused" in chosen:
                print(f"{system.name}: connection refused for 10 s, then back", flush=True)
                out.refused = scenarios.refused(
                    system,
                    lambda port: receiver(healthy.log.parent, f"refused-{port}", port=port),
                    100,
                    10.0,
                    min(args.timeout, 120.0),
                )
    if "memory" in chosen:
        print(f"{system.name}: memory, {args.waiting} waiting retries", flush=True)
        out.memory = scenarios.memory(system, healthy, args.waiting, args.memory_seconds)
    print(f"  {out}", flush=True)
    return out


def fmt(value: float, digits: int = 0) -> str:
    return f"{value:.{digits}f}"


T = TypeVar("T")


def cell(value: T | None, show: Callable[[T], str], missing: str = "-") -> str:
    return missing if value is None else show(value)


def vs_peer(mine: float, theirs: float | None, what: str = "peer") -> str:
    if theirs is None or theirs != theirs or theirs == 0:
        return ""
    return f"{mine / theirs:.2f}x {what}"


def table_rows(
    args: argparse.Namespace,
    ceilings: tuple[float, float] | None,
    ours: Measured,
    peer: Measured,
    external: dict[str, dict[str, str]],
    peer_note: str,
) -> list[Row]:
    rows: list[Row] = []
    dash = peer_note or "-"
    if ceilings:
        rows.append(Row("ceiling: requests keep-alive, 1 process (req/s)", fmt(ceilings[0])))
        rows.append(Row("ceiling: requests new connection (req/s)", fmt(ceilings[1])))
    if ours.throughput or peer.throughput:
        mine_t, peer_t = ours.throughput, peer.throughput
        rows.append(
            Row(
                "emit: events/s accepted (100 per transaction)",
                cell(mine_t, lambda t: fmt(t.emit_rate)),
                cell(peer_t, lambda t: fmt(t.emit_rate), dash),
            )
        )
        target, met = "", None
        if mine_t and ceilings:
            share = mine_t.rate / ceilings[0]
            target = f"{share:.2f} of keep-alive ceiling (>= 0.60)"
            extra = vs_peer(mine_t.rate, peer_t.rate if peer_t else None)
            target += f"; {extra}" if extra else ""
            met = share >= 0.60
        rows.append(
            Row(
                f"throughput, {args.events} events: deliveries/s",
                cell(mine_t, lambda t: fmt(t.rate)),
                cell(peer_t, lambda t: fmt(t.rate), dash),
                target,
                met,
            )
        )

        def recorded(t: scenarios.Throughput) -> str:
            return f"{t.arrived} / " + " / ".join(map(str, t.recorded))

        rows.append(
            Row(
                "throughput: arrived / stored events, deliveries ok, attempts",
                cell(mine_t, recorded),
                cell(peer_t, recorded, dash),
                f"all {args.events}",
                None
                if mine_t is None
                else mine_t.arrived == mine_t.count and min(mine_t.recorded) >= mine_t.count,
            )
        )
    if ours.ordered:
        o = ours.ordered
        per = o.messages_per_delivery
        rows.append(
            Row(
                f"ordered endpoint (in flight 1, {args.slow_delay * 1000:g} ms), {o.events} "
                f"events over {o.keys} keys: task messages per delivery",
                "?" if per is None else f"{per:.2f}",
                "no ordering",
                f"<= 1.5; {o.arrived} / {o.events} arrived, "
                + ("every key in order" if o.in_order else "OUT OF ORDER"),
                None if per is None else per <= 1.5 and o.in_order and o.arrived == o.events,
            )
        )
    peer_slow = {(s.endpoints, s.events, s.per_transaction): s for s in peer.slow}
    for mine_s in ours.slow:
        # The peer has no API: its one-per-transaction row stands beside ours through it.
        theirs = peer_slow.get((mine_s.endpoints, mine_s.events, mine_s.per_transaction))
        sent = (
            "one per API request"
            if mine_s.through_api
            else f"{mine_s.per_transaction} per transaction"
        )
        # 0.8 of what the default in-flight limits (4 per endpoint) allow, at most 600/s
        # from one delivery process.
        allowed = mine_s.endpoints * 4 / args.slow_delay
        bound = min(0.8 * allowed, 600.0)
        deliveries = mine_s.endpoints * mine_s.events
        target = f">= {bound:.0f}/s"
        met = mine_s.rate >= bound and mine_s.arrived == deliveries
        if mine_s.endpoints <= 20:
            target += "; >= 4x peer"
            if theirs is not None:
                met = met and mine_s.rate >= 4 * theirs.rate
        extra = vs_peer(mine_s.rate, theirs.rate if theirs else None)
        rows.append(
            Row(
                f"slow receiver ({args.slow_delay * 1000:g} ms), {mine_s.endpoints} endpoints, "
                f"{deliveries} deliveries, {sent}: deliveries/s (in flight)",
                f"{mine_s.rate:.0f} ({mine_s.in_flight:.0f})",
                cell(theirs, lambda t: f"{t.rate:.0f} ({t.in_flight:.0f})", dash),
                f"{target}{'; ' + extra if extra else ''}",
                met,
            )
        )
        per = mine_s.messages_per_delivery
        rows.append(
            Row(
                f"slow receiver, {mine_s.endpoints} endpoints, {sent}: task messages per delivery",
                "?" if per is None else f"{per:.2f}",
                cell(
                    theirs,
                    lambda t: (
                        "?" if t.messages_per_delivery is None else f"{t.messages_per_delivery:.2f}"
                    ),
                    dash,
                ),
                "<= 0.3",
                None if per is None else per <= 0.3,
            )
        )
        if mine_s.arrived != deliveries or (theirs and theirs.arrived != deliveries):
            rows.append(
                Row(
                    f"slow receiver, {mine_s.endpoints} endpoints: arrived",
                    f"{mine_s.arrived} / {deliveries}",
                    f"{theirs.arrived} / {deliveries}" if theirs else dash,
                )
            )
    if ours.latency or peer.latency:
        mine_l, peer_l = ours.latency, peer.latency
        name = f"latency, {args.rate:g}/s for {args.seconds:g}s: commit->arrival"
        # The target: p50 and p99 no worse than the peer's in the same run.
        for label, judged in (("p50", True), ("p95", False), ("p99", True)):

            def show(lat: scenarios.Latency, attr: str = label) -> str:
                return fmt(getattr(lat, attr))

            met = None
            if judged and mine_l is not None and peer_l is not None:
                met = (
                    getattr(mine_l, label) <= getattr(peer_l, label)
                    and mine_l.arrived == mine_l.offered
                )
            rows.append(
                Row(
                    f"{name} {label} (ms)",
                    cell(mine_l, show),
                    cell(peer_l, show, dash),
                    "<= the peer's" if judged else "",
                    met,
                )
            )

        def offered(lat: scenarios.Latency) -> str:
            return f"{lat.arrived} / {lat.offered} at {lat.achieved_rate:.0f}/s"

        rows.append(
            Row(
                "latency: arrived / offered, at the rate achieved",
                cell(mine_l, offered),
                cell(peer_l, offered, dash),
                f"{args.rate:g}/s asked",
            )
        )
    if ours.flaky or peer.flaky:
        mine_f, peer_f = ours.flaky, peer.flaky
        name = f"{args.fail_rate:.0%} answered 500, {args.flaky_events} events"
        rows.append(
            Row(
                f"{name}: delivered / sent",
                cell(mine_f, lambda f: f"{f.arrived} / {f.count}"),
                cell(peer_f, lambda f: f"{f.arrived} / {f.count}", dash),
                "100 %",
                None if mine_f is None else mine_f.arrived == mine_f.count,
            )
        )
        rows.append(
            Row(
                f"{name}: time to last arrival (s), retry delays x{args.retry_scale:g}",
                cell(mine_f, lambda f: fmt(f.seconds_to_last, 1)),
                cell(peer_f, lambda f: fmt(f.seconds_to_last, 1), dash),
                vs_peer(
                    mine_f.seconds_to_last if mine_f else 0.0,
                    peer_f.seconds_to_last if peer_f and mine_f else None,
                    "peer's time",
                ),
            )
        )
        rows.append(
            Row(
                f"{name}: attempts stored",
                cell(mine_f, lambda f: str(f.recorded[2])),
                cell(peer_f, lambda f: str(f.recorded[2]), dash),
            )
        )
    if ours.rollback is not None or peer.rollback is not None:
        rows.append(
            Row(
                "rolled-back transaction of 100 events: webhooks sent",
                cell(ours.rollback, str),
                cell(peer.rollback, str, dash),
                "0",
                None if ours.rollback is None else ours.rollback == 0,
            )
        )
    if ours.refused or peer.refused:

        def refused(r: scenarios.Refused) -> str:
            after = f" (last {r.seconds_after_back:.0f} s after)" if r.arrived else ""
            return f"{r.arrived} / {r.count}{after}"

        rows.append(
            Row(
                "connection refused for 10 s, 100 events: arrived once it is back",
                cell(ours.refused, refused),
                cell(peer.refused, refused, dash),
                "all, within 120 s",
                None if ours.refused is None else ours.refused.arrived == ours.refused.count,
            )
        )
    if ours.memory or peer.memory:

        def rss(m: scenarios.Memory) -> str:
            return f"{m.idle:.0f} -> {m.peak:.0f} ({m.ratio:.2f}x)"

        rows.append(
            Row(
                f"memory: worker RSS idle -> peak (MB), {args.waiting} waiting retries",
                cell(ours.memory, rss),
                cell(peer.memory, rss, dash),
                "<= 1.2x idle",
                None if ours.memory is None else ours.memory.ratio <= 1.2,
            )
        )
    rows += external_rows(args, external)
    return rows


def api_rows(api: "ApiIngest", events: int) -> list[Row]:
    """Each configuration of the API door beside the writing view (and the trivial view),
    then the timed configuration's acceptance -> arrival."""
    from bench.api_ingest import TARGET_P99_FACTOR, TARGET_SHARE
    from bench.common import percentile

    rows: list[Row] = []
    for run in api.runs:
        doing = "delivering on the same cores" if run.delivering else "workers stopped"
        rows.append(
            Row(
                f"API ({doing}): events/s from {run.clients} clients, {run.workers} web "
                "worker(s) (writing view; trivial view), p99 ms (writing view's)",
                f"{run.api.rate:.0f} ({run.anchor.rate:.0f}; {run.trivial.rate:.0f}), "
                f"p99 {run.api.p99_ms:.0f} ({run.anchor.p99_ms:.0f})",
                "",
                f"{run.share:.2f} of writing view"
                + (
                    "" if run.delivering else f" (>= {TARGET_SHARE}), p99 <= {TARGET_P99_FACTOR:g}x"
                ),
                None if run.delivering else run.met,
            )
        )
    if api.accepted:
        rows.append(
            Row(
                "API: events accepted with the workers stopped that arrived once they ran",
                f"{api.arrived} / {api.accepted}",
                "",
                "all",
                api.arrived == api.accepted,
            )
        )
    if api.waits:
        delivering = api.runs[-1]
        shown = " / ".join(f"{percentile(api.waits, pct) * 1000:.0f}" for pct in (50, 99, 100))
        p50, p99 = (percentile(api.waits, pct) * 1000 for pct in (50, 99))
        rows.append(
            Row(
                f"API: accepted->arrival p50 / p99 / max (ms), {len(api.waits)} arrived "
                f"({delivering.clients} clients, {delivering.workers} web workers, delivering)",
                shown,
                "",
                f"all {events}; p50 <= 20, p99 <= 100",
                len(api.waits) == events and p50 <= 20 and p99 <= 100,
            )
        )
    return rows


def main() -> None:
    args = parse_args()
    began = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="webhooks-bench-"))
    chosen = set(args.chosen)
    print(
        f"bench: {', '.join(args.chosen)}; peer {'on' if args.peer else 'off'}; "
        f"{'quick' if args.quick else 'full'} sizes; logs in {workdir}",
        flush=True,
    )
    ceilings: tuple[float, float] | None = None
    api: ApiIngest | None = None
    emitted: EmitCost | None = None
    soaked: Soak | None = None
    ours, peer = Measured(), Measured()
    peer_note = "" if args.peer else "not run"
    external: dict[str, dict[str, str]] = {}
    pulled: list[Row] = []
    needs_worker = chosen & set(SCENARIOS) - {"ceilings"}
    with (
        receiver(workdir, "healthy") as healthy,
        receiver(workdir, "flaky", args.fail_rate) as failing,
        receiver(workdir, "slow", delay=args.slow_delay) as slow,
    ):
        if "ceilings" in chosen:
            ceilings = (
                ceiling(healthy.url + "/ceiling", 2000, True),
                ceiling(healthy.url + "/ceiling", 500, False),
            )
        if needs_worker or SOAK in chosen:
            from bench.ours import OurSystem

            our_system = OurSystem(
                pool=args.ours_pool,
                concurrency=args.ours_concurrency,
                retry_scale=args.retry_scale,
                db_pool=args.ours_db_pool,
            )
            run_system(our_system, healthy, failing, slow, args, ours)
            pulled = pull.scenario(our_system, args, workdir, ours) if "pull" in chosen else []
            if "api" in chosen:
                from bench.api_ingest import api_accept_rate

                print(f"ours: {args.api_events} events over the API, each way", flush=True)
                api = api_accept_rate(args.api_events, system=our_system, receiver=healthy)
            if "emit-row" in chosen:
                from bench.emit_cost import emit_cost

                transactions = 200 if args.quick else 2000
                print(f"ours: emit 1 per transaction vs one plain row, {transactions}", flush=True)
                emitted = emit_cost(our_system, healthy, transactions)
            if SOAK in chosen:
                from bench.soak import soak

                print(f"ours: soak, {args.soak_minutes:g} min at {args.soak_rate:g}/s", flush=True)
                soaked = soak(
                    our_system,
                    lambda name, fail, low, high: receiver(
                        workdir, name, fail, delay=low, max_delay=high
                    ),
                    workdir,
                    minutes=args.soak_minutes,
                    rate=args.soak_rate,
                    fail_rate=args.fail_rate,
                )
            from django.db import connections

            # The isolation and receiving benchmarks recreate this database.
            connections.close_all()
        if needs_worker and args.peer:
            from bench.peer_side import PeerSystem, PeerUnavailable

            try:
                system = PeerSystem(
                    pool=args.pool, concurrency=args.concurrency, retry_scale=args.retry_scale
                )
                run_system(system, healthy, failing, slow, args, peer)
            except PeerUnavailable as error:
                peer_note = "failed" if peer != Measured() else "unavailable"
                print(f"\npeer: not run ({error}); carrying on with ours only", flush=True)
    if "isolation" in chosen:
        external["isolation"] = run_external(
            "bench.isolation",
            ["--rate", f"{args.isolation_rate:g}", "--seconds", f"{args.isolation_seconds:g}"],
            args.timeout,
        )
    if "receiving" in chosen:
        events = str(args.receiving_events)
        external["receiving"] = run_external(
            "bench.receiving",
            ["--events", events, "--noop-requests", events, "--burst", str(args.receiving_burst)],
            args.timeout,
        )
    if "filters" in chosen:
        external["filters"] = run_external(
            "bench.filters", ["--events", "5" if args.quick else "20"], args.timeout
        )
    print(f"\nbench: finished in {(time.monotonic() - began) / 60:.1f} min\n")
    rows = table_rows(args, ceilings, ours, peer, external, peer_note) + pulled
    if api is not None:
        # Beside emit(); django-webhook has no API to send events through.
        at = next((i + 1 for i, row in enumerate(rows) if row.measure.startswith("emit")), 0)
        rows[at:at] = api_rows(api, args.api_events)
    if emitted is not None:
        at = next((i + 1 for i, row in enumerate(rows) if row.measure.startswith("emit")), 0)
        rows.insert(
            at,
            Row(
                f"emit 1 per transaction to {emitted.endpoints} endpoints, workers stopped: "
                "transactions/s (the same writing one plain model row); deliveries arrived "
                "once they ran",
                f"{emitted.emit_rate:.0f} ({emitted.plain_rate:.0f}); "
                f"{emitted.arrived} / {emitted.expected}",
                "",
                f"{emitted.share:.2f} of plain row (>= 0.5; delivering on the same cores: "
                f"{emitted.delivering_share:.2f})",
                emitted.share >= 0.5 and emitted.arrived == emitted.expected,
            ),
        )
    if soaked is not None:
        from bench.soak import soak_rows

        rows += soak_rows(soaked)
    print(side_by_side(rows))


if __name__ == "__main__":
    main()
