"""The benchmark receiver logs when each request came beside when it was answered, and with
a delay range answers each request after a delay drawn from it (its own seeded generator),
so the soak can tell a delivery's overlapping requests from its retries."""

import random
import sys
from pathlib import Path

import requests

from bench.common import free_port, process, wait_for_port


def test_each_request_is_answered_after_its_drawn_delay_and_logged_with_its_arrival(
    tmp_path: Path,
) -> None:
    port, log = free_port(), tmp_path / "timing.log"
    command = [sys.executable, "-m", "bench.peer", str(port), str(log), "0", "5", "0.05", "0.3"]
    with process(command), requests.Session() as session:
        wait_for_port(port)
        for n in range(8):
            answer = session.post(
                f"http://127.0.0.1:{port}/x", data=b"{}", headers={"X-Webhook-Id": f"e{n}"}
            )
            assert answer.status_code == 200
    lines = [line.split() for line in log.read_text().splitlines()]
    draw = random.Random(5 + 1).uniform
    drawn = [draw(0.05, 0.3) for _ in lines]

    assert [parts[2] for parts in lines] == [f"e{n}" for n in range(8)]
    assert all(len(parts) == 5 for parts in lines)
    waited = [float(parts[0]) - float(parts[4]) for parts in lines]
    # The log's times are rounded to the microsecond.
    assert all(took >= delay - 2e-6 for took, delay in zip(waited, drawn, strict=True))
    assert max(drawn) > 0.2  # the range is used, not its low end alone
