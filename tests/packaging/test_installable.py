"""The README's "Add to an existing Django project", "Send an event" and "Handle a received
webhook", run as written, in order, in a project made by ``django-admin startproject proj``
with the distribution built from this checkout installed into a fresh virtual environment;
then the marked examples of the emitting page, in the same host.

The blocks are read from README.md (tests/docs/examples.py says how a block is marked), so
the README and this test cannot drift. What the test adds is only what the README leaves to
the reader, each named here:

- the reader's own app, ``invoices``, with an ``Invoice`` model (``paid``, ``mark_paid()``):
  the README's examples use "one of your objects";
- the reader's database and broker: PostgreSQL and Redis of this test run instead of
  startproject's SQLite, and the test's Redis database in place of the README's
  ``redis://127.0.0.1:6379/0``; ``runserver`` on a free port instead of 8000;
- an endpoint at a local receiver, so that the emitted event has somewhere to go, and a
  request signed with the source's secret, as the provider would send it.

The wheel is installed with the locked versions from uv's cache (``--offline``: ``bin/setup``
filled the cache), so no network is needed.
"""

import json
import os
import subprocess
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from tests.docs.examples import Example, examples, unmarked_blocks
from tests.fixtures import free_port
from tests.packaging.host import REPO, database_settings, query, run, wait_until
from tests.receiver import Receiver
from webhooks_core.crypto import signing

README = REPO / "README.md"
EMITTING = REPO / "docs" / "sending" / "emitting.md"
SECTIONS = ("Add to an existing Django project", "Send an event", "Handle a received webhook")
README_BROKER = "redis://127.0.0.1:6379/0"

pytestmark = [pytest.mark.worker, pytest.mark.timeout(600)]

# The reader's own app: what "invoice, one of your objects" stands for.
INVOICES = {
    "__init__.py": "",
    "models.py": """
        from django.db import models


        class Invoice(models.Model):
            amount = models.PositiveIntegerField(default=4200)
            paid = models.BooleanField(default=False)

            def mark_paid(self):
                self.paid = True
                self.save(update_fields=["paid"])
    """,
}
# Before a `shell` block that uses `invoice`: the reader's object.
AN_INVOICE = "from invoices.models import Invoice\ninvoice = Invoice.objects.create()\n"


class Host:
    """The reader's project, driven block by block."""

    def __init__(self, root: Path, python: Path, database: str, broker: str) -> None:
        self.root = root
        self.project = root / "proj-home"
        self.python = python
        self.broker = broker
        self.web_port = free_port()
        self.env = {
            "PATH": f"{python.parent}:{os.environ['PATH']}",
            "HOME": str(root),
            "VIRTUAL_ENV": str(python.parent.parent),
        }
        self.services: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.background: list[str] = []
        self.project.mkdir()
        run(python, "-m", "django", "startproject", "proj", self.project)
        app = self.project / "invoices"
        app.mkdir()
        for name, text in INVOICES.items():
            (app / name).write_text(textwrap.dedent(text).lstrip())
        self.database = database
        self.append(
            "proj/settings.py", 'INSTALLED_APPS += ["invoices"]\n' + database_settings(database)
        )

    def substituted(self, code: str) -> str:
        code = code.replace(README_BROKER, self.broker)
        return code.replace(
            "manage.py runserver", f"manage.py runserver --noreload 127.0.0.1:{self.web_port}"
        )

    def append(self, path: str, code: str) -> None:
        target = self.project / path
        target.write_text(target.read_text() + "\n" + code)

    def shell(self, code: str) -> str:
        return run(self.python, "manage.py", "shell", "-c", code, cwd=self.project, env=self.env)

    def sh(self, line: str) -> str:
        return run("sh", "-c", line, cwd=self.project, env=self.env)

    def start(self, line: str) -> None:
        log = (self.root / f"service-{len(self.services)}.log").open("wb")
        process = subprocess.Popen(
            ["sh", "-c", f"exec {line}"],
            cwd=self.project,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.services.append((line, process))

    def stop(self) -> None:
        for _, process in self.services:
            process.terminate()
        for _, process in self.services:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        self.services = []

    def restart(self) -> None:
        if self.services:
            self.stop()
            for line in self.background:
                self.start(line)

    def perform(self, example: Example) -> str:
        code = self.substituted(example.code)
        if example.kind == "install":
            # The `venv` fixture installed the wheel of this checkout, with its postgres extra.
            assert code.strip() == 'pip install ".[postgres]"'
            return ""
        if example.kind == "write":
            (self.project / example.argument).write_text(code)
            self.restart()
            return ""
        if example.kind == "append":
            self.append(example.argument, code)
            self.restart()
            return ""
        if example.kind == "sh":
            return "".join(self.sh(line) for line in code.splitlines() if line.strip())
        if example.kind == "background":
            for line in code.splitlines():
                if line.strip():
                    self.background.append(line)
                    self.start(line)
            return ""
        if example.kind == "shell":
            return self.shell((AN_INVOICE if "invoice." in code else "") + code)
        raise AssertionError(f"unknown example kind {example.kind!r}")


def test_every_block_of_the_sections_is_run() -> None:
    assert unmarked_blocks(README, set(SECTIONS)) == []
    assert {e.section for e in examples(README)} >= set(SECTIONS)


def test_the_readme_sends_and_receives_in_a_startproject_host(
    tmp_path: Path, venv: Path, host_database: str, clean_broker: str
) -> None:
    # The distribution holds the apps and nothing of this repository's own.
    listing = run(
        venv, "-c", "import importlib.util as u; print([m for m in "
        "('deliveries', 'receivers', 'webhooks_core', 'webhooks_project', 'demo_shop', "
        "'examples', 'tests', 'bench') if u.find_spec(m)])", cwd=tmp_path,
    )  # fmt: skip
    assert listing.strip() == "['deliveries', 'receivers', 'webhooks_core']"

    host = Host(tmp_path, venv, host_database, clean_broker)
    host.sh("python manage.py makemigrations invoices")
    steps = [e for e in examples(README) if e.section in SECTIONS]
    with Receiver.running() as peer:
        try:
            outputs = []
            for example in steps:
                emits = example.kind == "shell" and "emit(" in example.code
                if emits:
                    # After the README declared the type an endpoint can subscribe to.
                    endpoint_secret = after_the_installation(host, peer.url)
                outputs.append(host.perform(example))
                if emits:
                    the_event_arrives(peer, endpoint_secret, host_database)
            source_secret = outputs[-1].strip().splitlines()[-1]
            a_signed_webhook_is_handled(host, source_secret, host_database)
            emitting = examples(EMITTING)
            assert emitting
            for example in emitting:
                host.perform(example)
            requests = peer.wait_for(1 + len(emitting), timeout=60)
            assert {json.loads(r.body)["type"] for r in requests} == {"invoice.paid"}
            beat_runs_the_apps_schedule(host)
        finally:
            host.stop()


def after_the_installation(host: Host, receiver_url: str) -> str:
    """The apps' tables exist, the checks pass at startproject's settings (DEBUG on), and
    an endpoint takes every event (the test's, not the README's)."""
    tables = {r[0] for r in query(host.database, "SELECT tablename FROM pg_tables")}
    assert {"deliveries_endpoint", "deliveries_delivery", "receivers_inboxevent"} <= tables
    assert not {t for t in tables if t.startswith(("payments_", "demo_shop_"))}
    host.sh("python manage.py check --fail-level ERROR")
    return host.shell(
        "from deliveries.services import endpoint_create\n"
        f"_, secret = endpoint_create(url={receiver_url!r}, event_types=['invoice.*'])\n"
        "print(secret)"
    ).splitlines()[-1]


def the_event_arrives(peer: Receiver, secret: str, database: str) -> None:
    (request,) = peer.wait_for(1, timeout=60)
    assert signing.verify_v1(
        secret, request.headers["X-Webhook-Signature"], request.body, now=int(time.time())
    )
    body = json.loads(request.body)
    assert body["type"] == "invoice.paid"
    assert body["data"]["amount"] == 4200
    assert query(database, "SELECT paid FROM invoices_invoice WHERE id = %s", (body["data"]["invoice_id"],)) == [(True,)]  # fmt: skip # noqa: E501


def a_signed_webhook_is_handled(host: Host, secret: str, database: str) -> None:
    """A provider's request to /receivers/billing/ reaches the README's handler."""
    (invoice_id,) = query(database, "INSERT INTO invoices_invoice (amount, paid) VALUES (99, false) RETURNING id")[0]  # fmt: skip # noqa: E501
    body = json.dumps(
        {"id": "evt_billing_1", "type": "invoice.paid", "data": {"invoice_id": invoice_id}}
    ).encode()
    headers = signing.signature_headers(
        [secret], msg_id="evt_billing_1", timestamp=int(time.time()), body=body
    )
    url = f"http://127.0.0.1:{host.web_port}/receivers/billing/"

    def post() -> int:
        request = urllib.request.Request(
            url, data=body, headers={"Content-Type": "application/json", **headers}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
                return int(response.status)
        except OSError:
            return 0  # the server is still starting

    status = wait_until(post, "the host's web server")
    assert 200 <= status < 300
    wait_until(
        lambda: (
            query(database, "SELECT paid FROM invoices_invoice WHERE id = %s", (invoice_id,))
            == [(True,)]
        ),
        "the handler to mark the invoice paid",
    )
    assert query(
        database, "SELECT status FROM receivers_inboxevent WHERE event_id = 'evt_billing_1'"
    ) == [("processed",)]


def beat_runs_the_apps_schedule(host: Host) -> None:
    """`celery -A proj beat` sends the apps' periodic tasks, from a schedule the host never
    wrote (the sweepers are due every 15 s by default)."""
    (beat,) = [n for n, (line, _) in enumerate(host.services) if " beat" in line]
    log = host.root / f"service-{beat}.log"
    wait_until(
        lambda: all(
            f"Sending due task {name}" in log.read_text()
            for name in ("deliveries-sweep", "receivers-sweep")
        ),
        "beat to send the sweepers",
    )
