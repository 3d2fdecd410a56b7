"""The consumer examples of docs/sending/polling.md, run as printed there: the Python one
(requests + standardwebhooks) and the Node.js one (fetch + the `standardwebhooks` npm
package, installed with `npm ci` from tests/docs/node/ into a cached folder), each
against the Procfile's `web` line on PostgreSQL, reading a polling endpoint that has
events. Each must print every event once, get a later one by long polling, and commit
its consumer group to the end of the feed; with a wrong secret it must stop before it
prints anything (it verifies what it reads)."""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deliveries.models import Delivery, PollConsumer
from tests.conftest import wait_until
from tests.deliveries.polling.helpers import (
    WEB_ENV,
    create_poll_endpoint,
    delivered,
    emit,
)
from tests.helpers import procfile_web, stop_process
from tests.services import require_binary
from webhooks_core.crypto import signing

# Events are fanned out by the emitting process (no worker runs here).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("inline_fan_out")]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "sending" / "polling.md"
SNIPPET = re.compile(r"<!-- snippet: (?P<name>[\w-]+) -->\n```\w+\n(?P<code>.*?)\n```", re.S)
NODE_PACKAGE = Path(__file__).resolve().parent / "node"


def snippets() -> dict[str, str]:
    return {m["name"]: m["code"] + "\n" for m in SNIPPET.finditer(PAGE.read_text())}


@pytest.fixture(scope="module")
def web(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with procfile_web(tmp_path_factory.mktemp("web"), **WEB_ENV) as (base, _):
        yield base


def node_modules() -> Path:
    """The locked `standardwebhooks` package, installed once per lock file into a folder
    of the temporary directory (renamed into place, so concurrent runs do not clash)."""
    npm = require_binary("npm")
    lock = (NODE_PACKAGE / "package-lock.json").read_bytes()
    cache = Path(tempfile.gettempdir()) / f"webhooks-docs-node-{hashlib.sha256(lock).hexdigest()[:12]}"  # fmt: skip # noqa: E501
    if not (cache / "node_modules" / "standardwebhooks" / "package.json").exists():
        staging = Path(tempfile.mkdtemp(prefix="webhooks-docs-node-"))
        for name in ("package.json", "package-lock.json"):
            shutil.copy(NODE_PACKAGE / name, staging / name)
        result = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel", "error"],
            cwd=staging, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        try:
            staging.rename(cache)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)  # another run put it there first
    return cache / "node_modules"


def python_command(tmp_path: Path) -> list[str]:
    (tmp_path / "consume.py").write_text(snippets()["consumer-python"])
    return [sys.executable, "consume.py"]


def node_command(tmp_path: Path) -> list[str]:
    node = require_binary("node")
    (tmp_path / "node_modules").symlink_to(node_modules(), target_is_directory=True)
    (tmp_path / "consume.mjs").write_text(snippets()["consumer-node"])
    return [node, "consume.mjs"]


def start(command: list[str], tmp_path: Path, endpoint: dict[str, Any], secret: str) -> Any:
    env = {
        **os.environ,
        "POLL_URL": endpoint["poll_url"],
        "POLL_KEY": endpoint["poll_key"],
        "WEBHOOK_SECRET": secret,
    }
    with (tmp_path / "output.txt").open("wb") as out, (tmp_path / "errors.txt").open("wb") as err:
        return subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=err)


def printed(tmp_path: Path) -> list[str]:
    return (tmp_path / "output.txt").read_text().splitlines()


COMMANDS = {"python": python_command, "node": node_command}


def test_the_page_has_both_examples() -> None:
    assert set(snippets()) == {"consumer-python", "consumer-node"}


@pytest.mark.timeout(400)
@pytest.mark.parametrize("language", sorted(COMMANDS))
def test_the_example_reads_verifies_long_polls_and_commits(
    language: str, web: str, token: str, tmp_path: Path
) -> None:
    command = COMMANDS[language](tmp_path)
    endpoint = create_poll_endpoint(web, token)
    ids = emit(3)
    delivered(endpoint["id"], 3)
    consumer = start(command, tmp_path, endpoint, endpoint["secret"])
    try:

        def printed_all(wanted: list[str]) -> bool:
            assert consumer.poll() is None, (tmp_path / "errors.txt").read_text()
            return len(printed(tmp_path)) >= len(wanted)

        wait_until(lambda: printed_all(ids), timeout=60, what="the first events printed")
        # It waits in a long poll now: a new event comes to it.
        ids += emit(1)
        wait_until(lambda: printed_all(ids), timeout=60, what="the later event printed")
        assert printed(tmp_path) == [f"invoice.paid {event_id}" for event_id in ids]
        last = Delivery.objects.filter(endpoint_id=endpoint["id"]).order_by("-pk").first()
        assert last is not None

        def committed_to_the_end() -> bool:
            group = PollConsumer.objects.filter(endpoint_id=endpoint["id"], name="billing")
            return group.filter(committed_id=last.pk).exists()

        wait_until(committed_to_the_end, timeout=30, what="the group committed")
    finally:
        stop_process(consumer, grace_seconds=5)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("language", sorted(COMMANDS))
def test_the_example_stops_at_a_message_it_cannot_verify(
    language: str, web: str, token: str, tmp_path: Path
) -> None:
    command = COMMANDS[language](tmp_path)
    endpoint = create_poll_endpoint(web, token)
    emit(1)
    delivered(endpoint["id"], 1)
    consumer = start(command, tmp_path, endpoint, signing.generate_secret())
    try:
        consumer.wait(timeout=60)
    finally:
        stop_process(consumer, grace_seconds=5)
    errors = (tmp_path / "errors.txt").read_text()
    assert consumer.returncode != 0
    assert printed(tmp_path) == []
    assert re.search(r"signature", errors, re.I), errors
