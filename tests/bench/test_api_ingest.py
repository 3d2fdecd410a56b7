"""`python -m bench`'s API scenario (`bench/api_ingest.py`): each configuration of the API
door judged against the writing view of the same rounds, and the arrival row."""

import argparse

from bench import api_ingest
from bench.__main__ import FULL, SCENARIOS, api_rows
from bench.common import procfile_web_command, web_command


def timed(rate: float, p99_ms: float, n: int = 100) -> api_ingest.Timed:
    # n requests in n / rate seconds; the slowest 1 % at p99_ms.
    latencies = [p99_ms / 1000] * n
    return api_ingest.Timed(seconds=n / rate, latencies=latencies)


def test_a_configuration_meets_its_target_at_half_the_writing_view_within_twice_its_p99() -> None:
    met = api_ingest.DoorRun(2, 4, timed(60, 100), timed(100, 60), timed(400, 10))
    assert round(met.share, 2) == 0.6
    assert met.met is True
    slow = api_ingest.DoorRun(2, 4, timed(40, 100), timed(100, 60), timed(400, 10))
    assert slow.met is False
    late = api_ingest.DoorRun(2, 4, timed(60, 130), timed(100, 60), timed(400, 10))
    assert late.met is False


def test_the_api_rows_show_each_configuration_the_held_events_and_the_delivering_arrivals() -> None:
    runs = [
        api_ingest.DoorRun(2, 4, timed(60, 100), timed(100, 60), timed(400, 10)),
        api_ingest.DoorRun(1, 16, timed(20, 900), timed(100, 60), timed(400, 10)),
        api_ingest.DoorRun(2, 4, timed(30, 100), timed(100, 60), timed(400, 10), True),
    ]
    waits = [0.005] * 99 + [0.08]

    rows = api_rows(api_ingest.ApiIngest(runs, waits, accepted=200, arrived=200), 100)

    # The run delivering on the same cores is shown, not judged against the door's target.
    assert [row.met for row in rows] == [True, False, None, True, True]
    assert rows[0].measure.startswith("API (workers stopped): events/s from 4 clients, 2 web")
    assert rows[0].ours == "60 (100; 400), p99 100 (60)"
    assert rows[2].measure.startswith("API (delivering on the same cores)")
    assert rows[2].target == "0.30 of writing view"
    assert rows[3].ours == "200 / 200"
    assert rows[4].measure.startswith("API: accepted->arrival")
    assert rows[4].ours == "5 / 5 / 80"
    short = api_rows(api_ingest.ApiIngest(runs, waits[:50], accepted=200, arrived=199), 100)
    assert short[3].met is False, "every held event must arrive"
    assert short[-1].met is False, "every event must arrive"


def test_emit_row_is_a_scenario_and_the_burst_a_size_of_the_bench() -> None:
    assert "emit-row" in SCENARIOS
    assert "pull" in SCENARIOS
    assert argparse.Namespace(**FULL).receiving_burst == 20_000
    command = web_command(8123, 1)
    procfile = procfile_web_command().split()
    assert (
        command[command.index("--worker-class") + 1] == "webhooks_project.web_worker.GeventWorker"
    )
    assert (
        command[command.index("--worker-class") + 1]
        == procfile[procfile.index("--worker-class") + 1]
    )
    assert command[command.index("--workers") + 1] == "1"
    assert command[command.index("--bind") + 1] == "127.0.0.1:8123"
