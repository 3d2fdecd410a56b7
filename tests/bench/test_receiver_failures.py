"""The benchmark receiver answers 500 to a seeded share of requests: the same requests in the
same order fail the same way in every run, so both systems meet the same failures."""

import sys
from pathlib import Path

import requests

from bench.common import free_port, process, wait_for_port


def statuses(tmp_path: Path, name: str, count: int) -> list[int]:
    port = free_port()
    command = [sys.executable, "-m", "bench.peer", str(port), str(tmp_path / name), "0.3", "5"]
    with process(command), requests.Session() as session:
        wait_for_port(port)
        return [
            session.post(f"http://127.0.0.1:{port}/x", data=b"{}", timeout=5).status_code
            for _ in range(count)
        ]


def test_a_seeded_share_of_requests_fails_the_same_way_each_run(tmp_path: Path) -> None:
    first = statuses(tmp_path, "one.log", 300)
    second = statuses(tmp_path, "two.log", 300)

    assert first == second
    assert set(first) == {200, 500}
    assert 0.2 < first.count(500) / len(first) < 0.4
    logged = (tmp_path / "one.log").read_text().splitlines()
    assert [int(line.split()[3]) for line in logged] == first
