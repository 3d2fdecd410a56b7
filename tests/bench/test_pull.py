"""`python -m bench`'s pull scenario: its rows judged against push's rows of the same run,
and its consumers run against the Procfile's `web` line on a polling endpoint's feed (a
backlog read in pages of 100, and a long poll that gets new events)."""

import argparse
from collections.abc import Iterator

import pytest

from bench import pull
from bench.__main__ import FULL, SCENARIOS
from bench.common import Row, procfile_web_command
from bench.scenarios import Latency, Measured, Throughput
from tests.deliveries.polling.helpers import WEB_ENV, delivered, emit
from tests.helpers import procfile_web

ARGS = argparse.Namespace(**FULL)


def rows(
    push: Measured, backlog: float | None = None, p50: float = 0, p99: float = 0
) -> dict[str, Row]:
    """The pull rows by their name after "pull: "."""
    out = pull.Pull(
        backlog=None if backlog is None else pull.Backlog(100_000, 1000, 100_000 / backlog),
        latency=pull.PullLatency(6000, 6000, p50, p50, p99) if p50 else None,
    )
    return {row.measure.split(":")[1].strip(): row for row in pull.pull_rows(ARGS, out, push)}


def test_pull_is_a_scenario_of_the_bench() -> None:
    assert "pull" in SCENARIOS
    assert procfile_web_command().startswith("gunicorn webhooks_project.wsgi")
    assert "127.0.0.1:" in procfile_web_command()


def test_the_backlog_row_is_judged_against_the_push_rate_of_the_same_run() -> None:
    push = Throughput(10_000, 500.0, 10_000, 1000.0, (10_000, 10_000, 10_000))
    [met] = rows(Measured(throughput=push), 6000).values()
    assert met.ours == "6000"
    assert met.target.startswith("6.00x push's 1000/s")
    assert met.met is True
    [short] = rows(Measured(throughput=push), 4000).values()
    assert short.met is False
    [alone] = rows(Measured(), 4000).values()
    assert alone.met is None  # no push row to compare with


def test_the_latency_rows_are_judged_against_push_p50_and_p99() -> None:
    push = Latency(6000, 6000, p50=4.0, p95=8.0, p99=11.0)
    within = rows(Measured(latency=push), p50=6, p99=20)
    [measured] = [row for name, row in within.items() if name.startswith("long polling at")]
    assert measured.ours == "6 / 6 / 20"
    assert measured.met is True
    over = rows(Measured(latency=push), p50=9, p99=20)
    assert [row.met for name, row in over.items() if name.startswith("long polling at")] == [False]


@pytest.fixture(scope="module")
def web(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with procfile_web(tmp_path_factory.mktemp("web"), **WEB_ENV) as (base, _):
        yield base


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("inline_fan_out")  # no worker: the test process fans out
def test_the_consumers_read_a_backlog_and_long_poll_through_the_web_process(
    web: str,
) -> None:
    endpoint, key = pull.poll_endpoint("invoice.paid")
    poll_url = f"{web}/api/v1/poll/{endpoint.pk}"
    pull.write_backlog(endpoint, "invoice.paid", 250)
    delivered(str(endpoint.pk), 250)

    read = pull.read_backlog(poll_url, key, 250, timeout=60)

    assert (read.messages, read.pages) == (250, 3)
    assert read.rate > 0
    with pull.long_polling(poll_url, key) as arrived:
        ids = set(emit(2))
        pull.wait_for(arrived, ids, timeout=30)
    assert ids <= arrived.keys()
    assert len(arrived) == 252
