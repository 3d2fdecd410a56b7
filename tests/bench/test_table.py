"""Pure pieces of `python -m bench`: reading the receiver's log, telling the peer's requests
apart, the side-by-side table and reading the rows of the benchmarks it runs as processes."""

import argparse
from pathlib import Path

from bench.__main__ import FULL, table_rows
from bench.common import Row, run_paced, side_by_side
from bench.external import external_rows
from bench.peer import id_from_body
from bench.scenarios import Measured, Ordered, read_arrivals


def test_the_peer_is_identified_by_the_ref_in_its_body() -> None:
    body = b'{"object": {"ref": "5f0c", "n": 1}, "topic": "shop.Order/create"}'

    assert id_from_body(body) == "5f0c"
    assert id_from_body(b"not json") == "-"
    assert id_from_body(b'{"object": 3}') == "-"


def test_only_successful_answers_count_as_arrivals(tmp_path: Path) -> None:
    log = tmp_path / "arrivals.log"
    log.write_text(
        "1.0 /ours/flaky a 500\n"
        "2.0 /ours/flaky a 200\n"
        "3.0 /ceiling ceiling 200\n"
        "4.0 /ours/flaky b 200\n"
        "4.5 /ours/flaky b 200\n"
    )

    arrivals = read_arrivals(log)

    assert arrivals == {("/ours/flaky", "a"): [2.0], ("/ours/flaky", "b"): [4.0, 4.5]}
    assert read_arrivals(tmp_path / "missing.log") == {}


def test_the_table_has_one_column_per_system_and_a_verdict() -> None:
    table = side_by_side(
        [
            Row("throughput (deliveries/s)", "700", "120", "1.09 of ceiling (>= 0.60)", True),
            Row("ceiling (req/s)", "640"),
            Row("p99 (ms)", "150", "-", "<= 100 ms", False),
        ]
    )
    lines = table.splitlines()

    assert lines[0].split("|")[1:-1] == [
        " measure                   ",
        " ours ",
        " peer ",
        " ratio / target            ",
        " met? ",
    ]
    assert lines[2].rstrip().endswith("| yes  |")
    assert lines[3].rstrip().endswith("|      |")
    assert lines[4].rstrip().endswith("| NO   |")


def test_rows_of_the_isolation_and_receiving_benchmarks_become_verdicts() -> None:
    args = argparse.Namespace(**FULL)
    external = {
        "isolation": {
            "healthy alone: commit->arrival p50/p95/p99 (ms)": "63 / 249 / 267",
            "healthy beside dead: commit->arrival p50/p95/p99 (ms)": "151 / 561 / 607",
            "p99 beside / alone": "2.27x (OVER 2x)",
        },
        "receiving": {
            "trivial Django view: requests/s": "2631",
            "receiver (verify + insert + commit): requests/s": "1400",
            "receiver (verify + insert + commit): latency p50 / p99 (ms)": "9.9 / 43.8",
            "lost / duplicated": "0 / 0",
        },
    }

    rows = {row.measure: row for row in external_rows(args, external)}

    assert rows["isolation: p99 beside / alone"].met is False
    receiver = rows["receiver, 10000 signed events: req/s (trivial view)"]
    assert receiver.ours == "1400 (2631)"
    assert receiver.met is True
    assert rows["receiver: latency p99 (ms)"].ours == "43.8"
    assert rows["receiver: latency p99 (ms)"].met is True
    assert rows["receiver: lost / duplicated"].met is True


def test_paced_calls_share_one_schedule_across_lanes() -> None:
    exits: list[int] = []

    committed = run_paced(
        200, 0.1, lambda n: f"id-{n}", lanes=4, on_lane_exit=lambda: exits.append(1)
    )

    assert sorted(committed) == sorted(f"id-{n}" for n in range(20))
    assert len(exits) == 4


def test_the_ordered_endpoints_row_holds_its_messages_to_the_target_and_its_order() -> None:
    args = argparse.Namespace(**FULL, slow_delay=0.2)

    def row(per: float, in_order: bool = True, arrived: int = 60) -> Row:
        ours = Measured(ordered=Ordered(60, 6, arrived, per, in_order))
        [ordered] = [
            r for r in table_rows(args, None, ours, Measured(), {}, "") if "ordered" in r.measure
        ]
        return ordered

    assert row(1.2).met is True
    assert row(1.2).ours == "1.20"
    assert row(1.6).met is False  # more than 1.5 task messages a delivery
    assert row(1.2, in_order=False).met is False
    assert row(1.2, arrived=59).met is False


def test_the_receiver_is_judged_against_the_writing_view_and_its_burst_by_5xx_and_refusals() -> (
    None
):
    args = argparse.Namespace(**FULL)
    receiving = {
        "trivial Django view: requests/s": "2631",
        "writing view (bearer token + insert + commit): requests/s": "1000",
        "writing view (bearer token + insert + commit): latency p50 / p99 (ms)": "5.0 / 20.5",
        "receiver (verify + insert + commit): requests/s": "600",
        "receiver (verify + insert + commit): latency p50 / p99 (ms)": "9.9 / 43.8",
        "burst of 20000 from 32: requests/s": "550",
        "burst of 20000 from 32: latency p50 / p99 (ms)": "30.0 / 120.0",
        "burst: 5xx / connections refused": "0 / 0 (target 0 / 0: met)",
        "lost / duplicated": "0 / 0",
    }

    rows = {row.measure: row for row in external_rows(args, {"receiving": receiving})}

    receiver = rows["receiver, 10000 signed events: req/s (writing view; trivial view)"]
    assert receiver.ours == "600 (1000; 2631)"
    assert receiver.met is True
    assert rows["writing view: latency p99 (ms)"].ours == "20.5"
    [burst] = [row for name, row in rows.items() if name.startswith("receiver, burst of 20000")]
    assert burst.ours == "550, 120; 0 / 0"
    assert burst.met is True
    receiving["burst: 5xx / connections refused"] = "3 / 0 (target 0 / 0: not met)"
    rows = {row.measure: row for row in external_rows(args, {"receiving": receiving})}
    [burst] = [row for name, row in rows.items() if name.startswith("receiver, burst of 20000")]
    assert burst.met is False
    receiving["receiver (verify + insert + commit): requests/s"] = "400"
    rows = {row.measure: row for row in external_rows(args, {"receiving": receiving})}
    assert rows["receiver, 10000 signed events: req/s (writing view; trivial view)"].met is False
