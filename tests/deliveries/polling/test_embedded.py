"""Pull delivery on the embedded default (`make run`: SQLite, the in-process broker and
worker): a newcomer creates a polling endpoint, emits, and long-polls the event."""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from standardwebhooks.webhooks import Webhook

from tests.conftest import wait_until
from tests.fixtures import free_port
from tests.helpers import call, embedded_env, serve, status_if_answering, stop_process

ROOT = Path(__file__).resolve().parents[3]


def test_a_polling_endpoint_on_the_embedded_default(tmp_path: Path) -> None:
    env = embedded_env(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "run.log"
    process = serve(env, port, log)
    try:
        wait_until(
            lambda: status_if_answering(f"{base}/healthz") == 200 or process.poll() is not None,
            timeout=90,
            what="the embedded server to answer",
        )
        assert process.poll() is None, log.read_text()[-3000:]
        token = subprocess.run(
            [sys.executable, "manage.py", "create_api_token", "embedded-test"],
            cwd=ROOT, env=env, capture_output=True, text=True, check=True,
        ).stdout.strip().splitlines()[-1]  # fmt: skip
        status, endpoint = call(
            f"{base}/api/v1/endpoints", token, "POST", {"mode": "poll", "event_types": ["*"]}
        )
        assert status == 201, endpoint
        status, types = call(f"{base}/api/v1/event-types", token)
        declared = types["results"][0]
        answer: dict[str, Any] = {}

        def long_poll() -> None:
            answer["page"] = call(
                f"{endpoint['poll_url']}?wait=20", endpoint["poll_key"], timeout=30
            )

        waiter = threading.Thread(target=long_poll)
        waiter.start()
        status, event = call(
            f"{base}/api/v1/events",
            token,
            "POST",
            {"type": declared["name"], "data": declared["versions"][-1]["example"]},
        )
        assert status == 202, event
        emitted_at = time.monotonic()
        waiter.join(25)
        status, page = answer["page"]
        assert status == 200, page
        assert time.monotonic() - emitted_at < 5
        assert [m["id"] for m in page["data"]] == [event["id"]]
        message = page["data"][0]
        assert Webhook(endpoint["secret"]).verify(message["body"], message["headers"])
        assert json.loads(message["body"]) == message["payload"]
    finally:
        stop_process(process)
