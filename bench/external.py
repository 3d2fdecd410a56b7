"""The benchmarks `python -m bench` runs as processes of their own (`bench.isolation`,
`bench.receiving`, `bench.filters`): running one and reading the rows it wrote
(`BENCH_ROWS_FILE`), and turning them into rows of the side-by-side table with a verdict."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import isolation as isolation_bench
from bench.common import ROOT, Row


def run_external(module: str, options: list[str], timeout: float) -> dict[str, str]:
    """Another benchmark run alone as a process; its rows (name -> value) via BENCH_ROWS_FILE."""
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as rows_file:
        path = Path(rows_file.name)
    print(f"\n== python -m {module} {' '.join(options)}", flush=True)
    env = {**os.environ, "BENCH_ROWS_FILE": str(path)}
    try:
        subprocess.run(
            [sys.executable, "-m", module, *options],
            cwd=ROOT,
            env=env,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        print(f"{module}: stopped after {timeout:.0f}s", flush=True)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.unlink()
    return {name: value for name, value in rows}


def find(rows: dict[str, str], *words: str) -> str | None:
    """The value of the first row whose name contains every word (names may be reworded)."""
    for name, value in rows.items():
        if all(word in name for word in words):
            return value
    return None


def numbers(text: str | None) -> list[float]:
    found = []
    for part in (text or "").replace("/", " ").replace("x", " ").split():
        try:
            found.append(float(part))
        except ValueError:
            continue
    return found


def external_rows(args: argparse.Namespace, external: dict[str, dict[str, str]]) -> list[Row]:
    rows: list[Row] = []
    isolation = external.get("isolation")
    if isolation is not None:
        ratio = numbers(find(isolation, "p99 beside"))
        rows.append(
            Row(
                "isolation: healthy p50/p95/p99 alone (ms)",
                find(isolation, "healthy alone") or "no figure",
            )
        )
        rows.append(
            Row(
                "isolation: healthy p50/p95/p99 beside a dead endpoint (ms)",
                find(isolation, "healthy beside") or "no figure",
            )
        )
        rows.append(
            Row(
                "isolation: p99 beside / alone",
                f"{ratio[0]:.2f}x" if ratio else "no figure",
                "",
                f"<= {isolation_bench.MAX_RATIO}x",
                bool(ratio) and ratio[0] <= isolation_bench.MAX_RATIO,
            )
        )
    receiving = external.get("receiving")
    if receiving is not None:
        trivial = numbers(find(receiving, "trivial", "requests/s"))
        accepted = numbers(find(receiving, "receiver (", "requests/s"))
        p99 = numbers(find(receiving, "receiver (", "p99"))
        writing = numbers(find(receiving, "writing view", "requests/s"))
        writing_p99 = numbers(find(receiving, "writing view", "p99"))
        if writing and accepted and trivial:
            # The writing view is the anchor; the trivial view a second reference.
            share = accepted[0] / writing[0] if writing[0] else 0.0
            rows.append(
                Row(
                    f"receiver, {args.receiving_events} signed events: req/s "
                    "(writing view; trivial view)",
                    f"{accepted[0]:.0f} ({writing[0]:.0f}; {trivial[0]:.0f})",
                    "",
                    f"{share:.2f} of writing view (>= 0.50)",
                    share >= 0.5,
                )
            )
        elif trivial and accepted:
            share = accepted[0] / trivial[0] if trivial[0] else 0.0
            rows.append(
                Row(
                    f"receiver, {args.receiving_events} signed events: req/s (trivial view)",
                    f"{accepted[0]:.0f} ({trivial[0]:.0f})",
                    "",
                    f"{share:.2f} of trivial view (>= 0.50)",
                    share >= 0.5,
                )
            )
        else:
            rows.append(Row("receiver: req/s", "no figure", "", ">= 0.50 of trivial", False))
        if p99:
            rows.append(
                Row("receiver: latency p99 (ms)", f"{p99[-1]:.1f}", "", "<= 50 ms", p99[-1] <= 50)
            )
        if writing_p99:
            rows.append(Row("writing view: latency p99 (ms)", f"{writing_p99[-1]:.1f}"))
        burst = find(receiving, "burst:", "5xx")
        if burst:
            rate = numbers(find(receiving, "burst of", "requests/s"))
            p99_burst = numbers(find(receiving, "burst of", "p99"))
            rows.append(
                Row(
                    f"receiver, burst of {getattr(args, 'receiving_burst', '?')} signed events "
                    "from 32 connections: req/s, p99 ms; 5xx / connections refused",
                    f"{rate[0] if rate else 0:.0f}, {p99_burst[-1] if p99_burst else 0:.0f}; "
                    + burst.split(" (")[0],
                    "",
                    "0 / 0",
                    numbers(burst.split(" (")[0]) == [0, 0],
                )
            )
        lost = find(receiving, "lost")
        if lost:
            rows.append(
                Row("receiver: lost / duplicated", lost, "", "0 / 0", numbers(lost) == [0, 0])
            )
    filters = external.get("filters")
    if filters is not None:
        plain, filtered = find(filters, "no filters"), find(filters, "ms per event, filtered")
        ratio_text = find(filters, "filtered / unfiltered")
        ratio = numbers(ratio_text)
        rows.append(
            Row(
                "fan-out to 100 endpoints, ms per event: no filters -> all filtered",
                f"{plain} -> {filtered} ({ratio_text})" if plain and filtered else "no figure",
                "",
                "<= 1.2x",
                bool(ratio) and ratio[-1] <= 1.2,
            )
        )
        in_transaction = find(filters, "in the transaction only")
        if in_transaction:
            rows.append(
                Row(
                    "the same, its transaction only (no publishing), ms",
                    in_transaction.replace(" / ", " -> "),
                    "",
                    "<= 1.2x",
                    numbers(in_transaction.split("(")[-1])[:1] <= [1.2],
                )
            )
    return rows
