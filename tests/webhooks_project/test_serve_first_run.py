"""`make run`'s first run prints the admin's generated password, even into a file.

Redirected to a file or a pipe, stdout is block-buffered: a line written before the
server starts serving stayed in the buffer for as long as the process ran, so someone who
sent `make run` to a log file never saw the password. The test runs `manage.py serve`
exactly so, on its own SQLite database and the in-process broker, and reads the file while
the server is still running.
"""

import json
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import wait_until
from tests.fixtures import free_port
from tests.helpers import call, embedded_env, serve, status_if_answering, stop_process
from tests.receiver import Receiver
from webhooks_core.crypto import signing

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = re.compile(r"user 'admin', password '([^']+)' \(generated")


def test_generated_password_reaches_a_redirected_stdout(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    process = serve(embedded_env(tmp_path), free_port(), log)
    try:
        wait_until(
            lambda: PASSWORD.search(log.read_text()) or process.poll() is not None,
            timeout=90,
            what="the generated password in the redirected output",
        )
        assert process.poll() is None, "serve exited early"
        match = PASSWORD.search(log.read_text())
        assert match is not None
        assert len(match.group(1)) >= 12
        assert "changepassword admin" in log.read_text()
    finally:
        stop_process(process)


def test_the_embedded_default_delivers_events_end_to_end(tmp_path: Path) -> None:
    """The README's run command on its embedded default (SQLite, the in-process broker
    and worker): events POSTed one per request reach a real receiver, signed, each once."""
    env = embedded_env(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"

    with Receiver.running() as peer:
        process = serve(env, port, tmp_path / "run.log")
        try:
            wait_until(
                lambda: status_if_answering(f"{base}/healthz") == 200 or process.poll() is not None,
                timeout=90,
                what="the embedded server to answer",
            )
            assert process.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
            token = subprocess.run(
                [sys.executable, "manage.py", "create_api_token", "embedded-test"],
                cwd=ROOT, env=env, capture_output=True, text=True, check=True,
            ).stdout.strip().splitlines()[-1]  # fmt: skip
            status, endpoint = call(
                f"{base}/api/v1/endpoints", token, "POST", {"url": peer.url, "event_types": ["*"]}
            )
            assert status == 201, endpoint
            # A declared type of the reference deployment, with its example as data.
            status, types = call(f"{base}/api/v1/event-types", token)
            assert status == 200, types
            declared = types["results"][0]
            example = declared["versions"][-1]["example"]
            accepted = set()
            for _ in range(3):
                status, event = call(
                    f"{base}/api/v1/events",
                    token,
                    "POST",
                    {"type": declared["name"], "data": example},
                )
                assert status in (201, 202), event
                accepted.add(event["id"])
            requests = peer.wait_for(3, timeout=60)
            assert sorted(json.loads(r.body)["id"] for r in requests) == sorted(accepted)

            def all_succeeded_once() -> bool:
                status, page = call(f"{base}/api/v1/deliveries", token)
                assert status == 200, page
                rows = page["results"]
                return len(rows) == 3 and all(
                    row["status"] == "succeeded" and row["attempt_count"] == 1 for row in rows
                )

            wait_until(all_succeeded_once, timeout=30, what="three deliveries, one attempt each")
            assert len(peer.requests) == 3, "no request sent twice"
            for request in requests:
                assert signing.verify_v1(
                    endpoint["secret"],
                    request.headers["X-Webhook-Signature"],
                    request.body,
                    now=int(time.time()),
                )
        finally:
            stop_process(process)


def test_the_demo_console_shows_deliveries_and_receipts_and_its_receiver_handles_them(
    tmp_path: Path,
) -> None:
    """`make run` with its demo: every webhook the demo's receivers get is processed by a
    handler (none ends `ignored`), and the console shows attempts and receipts, not
    Celery's per-task and per-sweep bookkeeping."""
    env = embedded_env(tmp_path)
    port = free_port()
    log = tmp_path / "run.log"
    database = tmp_path / "db.sqlite3"
    process = serve(env, port, log, demo=True)

    def rows(sql: str) -> list[tuple[object, ...]]:
        with sqlite3.connect(database, timeout=20) as conn:
            return conn.execute(sql).fetchall()

    def demo_done() -> bool:
        if process.poll() is not None:
            return True
        if "demo shop: 3 orders placed" not in log.read_text():
            return False
        deliveries = rows("SELECT status FROM deliveries_delivery")
        inbox = rows("SELECT status FROM receivers_inboxevent")
        return (
            bool(deliveries)
            and {s for (s,) in deliveries} == {"succeeded"}
            and len(inbox) == len(deliveries)
            and not {s for (s,) in inbox} & {"received", "processing", "retrying"}
        )

    try:
        wait_until(demo_done, timeout=120, what="the demo's deliveries and their processing")
        assert process.poll() is None, log.read_text()[-3000:]
        statuses = rows("SELECT status, count(*) FROM receivers_inboxevent GROUP BY status")
        assert {status for status, _ in statuses} == {"processed"}, statuses
        # Every task the demo ran was received and finished by the worker (bookkeeping lines
        # before); beat's sweeps, due 15 s after the start, have usually been sent too.
        text = log.read_text()
        assert "webhook attempt succeeded" in text
        assert "webhook accepted" in text
        for noise in ("Sending due task", "[celery.worker.strategy]", "[celery.app.trace]",
                      "No hostname was supplied"):  # fmt: skip
            assert noise not in text, noise
    finally:
        stop_process(process)
