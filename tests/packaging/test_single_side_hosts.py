"""A host that only receives, and one that only sends, each installed from the
built wheel into a ``django-admin startproject`` project with only the lines the install
page names (docs/install.md): each migrates without the other side's tables, makes an API
token with ``create_api_token`` and does its side's work through the HTTP API, a worker and
a real peer."""

import json
import os
import subprocess
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.docs.examples import examples
from tests.fixtures import free_port
from tests.helpers import call, status_if_answering
from tests.packaging.host import (
    CELERY_PY,
    INIT_PY,
    QUEUES,
    REPO,
    WAIT_SECONDS,
    database_settings,
    query,
    run,
    wait_until,
)
from tests.receiver import Receiver
from webhooks_core.crypto import signing

pytestmark = [pytest.mark.worker, pytest.mark.timeout(600)]

INTEGRATION = REPO / "docs" / "integration.md"

METRICS_TOKEN = "scrape-me"


def write_host(root: Path, python: Path, database: str, broker: str, side: str) -> Path:
    """A startproject host with the install page's lines for one side (plus its own
    handler app on the receiving side)."""
    project = root / f"{side}-host"
    project.mkdir()
    run(python, "-m", "django", "startproject", "host", project)
    package = project / "host"
    # The install page's two blocks for this side, as written (its `proj` is this `host`).
    tab = {"receiving": "Receiving only", "sending": "Sending only"}[side]
    blocks = [e for e in examples(INTEGRATION) if e.tab == tab]
    assert sorted(e.argument for e in blocks) == ["proj/settings.py", "proj/urls.py"]
    for example in blocks:
        target = project / example.argument.replace("proj/", "host/")
        target.write_text(target.read_text() + "\n" + example.code)
    settings_py = package / "settings.py"
    settings_py.write_text(
        settings_py.read_text()
        + textwrap.dedent(f"""
            INSTALLED_APPS += {["shop"] if side == "receiving" else []!r}
            CELERY_BROKER_URL = {broker!r}
            RECEIVERS_HANDLER_MODULES = {["shop.handlers"] if side == "receiving" else []!r}
            METRICS_TOKEN = {METRICS_TOKEN!r}
            # No catalogue in this host: any event type may be sent.
            WEBHOOKS_REQUIRE_DECLARED_TYPES = False
        """)
        + database_settings(database)
    )
    urls_py = package / "urls.py"
    urls_py.write_text(
        urls_py.read_text()
        + "\nfrom webhooks_core.web.metrics import metrics_view\n\n"
        + 'urlpatterns += [path("metrics", metrics_view)]\n'
    )
    (package / "celery.py").write_text(CELERY_PY.lstrip())
    (package / "__init__.py").write_text(INIT_PY.lstrip())
    if side == "receiving":
        shop = project / "shop"
        shop.mkdir()
        (shop / "__init__.py").write_text("")
        (shop / "handlers.py").write_text(
            textwrap.dedent("""
                import logging

                from receivers.handlers import inbox_handler

                logger = logging.getLogger("shop")


                @inbox_handler("shop.order.*")
                def record(event):
                    logger.warning("handled %s", event.event_id)
            """).lstrip()
        )
    return project


@contextmanager
def serving(venv: Path, project: Path, env: dict[str, str], log: Path) -> Iterator[str]:
    """The host's web server and a worker; yields the server's base URL once it answers."""
    manage = [str(venv), str(project / "manage.py")]
    port = free_port()
    processes = [
        subprocess.Popen(
            [str(venv), "-m", "celery", "-A", "host", "worker", "-Q", QUEUES,
             "--pool", "threads", "--concurrency", "4", "--loglevel", "WARNING"],
            cwd=project, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
        ),
        subprocess.Popen(
            [*manage, "runserver", "--noreload", f"127.0.0.1:{port}"],
            cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ),
    ]  # fmt: skip
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        return status_if_answering(f"{base}/api/v1/") is not None

    try:
        wait_until(up, "the host's web server")
        yield base
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def prepare(
    tmp_path: Path, venv: Path, database: str, broker: str, side: str
) -> tuple[Path, dict[str, str], str, set[str]]:
    """Write, migrate and check the host; make a token. Returns the project, its
    environment, the token and the database's tables."""
    project = write_host(tmp_path, venv, database, broker, side)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(project)}
    manage = (venv, project / "manage.py")
    run(*manage, "migrate", "--noinput", cwd=project, env=env)
    run(*manage, "check", "--fail-level", "ERROR", cwd=project, env=env)
    tables = {row[0] for row in query(database, "SELECT tablename FROM pg_tables")}
    token = run(*manage, "create_api_token", "ops", cwd=project, env=env).split()[-1]
    assert token.startswith("whk_")
    return project, env, token, tables


ADMIN_SCRIPT = """
from django.contrib.auth.models import User
from django.test import Client

user = User.objects.create_superuser("root", "root@example.com", "pw")
client = Client(HTTP_HOST="localhost")
client.force_login(user)
for page in {pages!r}:
    print(page, client.get(page).status_code)
made = client.post("/admin/webhooks_core/apitoken/add/", {{"name": "from-admin"}})
print("token page", made.status_code, "whk_" in made.content.decode())
"""


def admin_pages(venv: Path, project: Path, env: dict[str, str], pages: list[str]) -> list[str]:
    """What the host's admin answers a superuser for ``pages``, and its token page."""
    script = ADMIN_SCRIPT.format(pages=pages)
    out = run(venv, project / "manage.py", "shell", "-c", script, cwd=project, env=env)
    return out.strip().splitlines()[-len(pages) - 1 :]


def test_a_host_that_only_receives(
    tmp_path: Path, venv: Path, host_database: str, clean_broker: str
) -> None:
    project, env, token, tables = prepare(tmp_path, venv, host_database, clean_broker, "receiving")
    assert {"webhooks_core_apitoken", "webhooks_core_auditentry", "receivers_inboxevent"} <= tables
    assert not {t for t in tables if t.startswith("deliveries_")}
    # The package is there (one distribution), the app is not installed and never imported.
    run(
        venv, "-c",
        "import django, os, sys; os.environ['DJANGO_SETTINGS_MODULE'] = 'host.settings'; "
        "django.setup(); import receivers.api.urls, receivers.admin, receivers.tasks; "
        "assert not [m for m in sys.modules if m.split('.')[0] == 'deliveries'], "
        "sorted(m for m in sys.modules if m.startswith('deliveries'))",
        cwd=project, env=env,
    )  # fmt: skip

    with serving(venv, project, env, tmp_path / "worker.log") as base:
        assert call(f"{base}/api/v1/sources", None)[0] == 401
        status, created = call(
            f"{base}/api/v1/sources", token, "POST", {"slug": "partner", "scheme": "ours"}
        )
        assert status == 201, created
        body = json.dumps(
            {"id": "evt_1", "type": "shop.order.paid", "data": {"order_id": 41}}
        ).encode()
        headers = signing.signature_headers(
            [created["secret"]], msg_id="evt_1", timestamp=int(time.time()), body=body
        )
        status, answer = call(f"{base}/receivers/partner/", None, "POST", raw=body, headers=headers)
        assert 200 <= status < 300, answer

        def processed() -> bool:
            status, page = call(f"{base}/api/v1/inbox", token)
            assert status == 200, page
            return [row["status"] for row in page["results"]] == ["processed"]

        wait_until(processed, "the inbox event to be processed", timeout=WAIT_SECONDS)
        assert "handled evt_1" in (tmp_path / "worker.log").read_text()
        # The sending side's routes are not there; the schema is the receiving API's.
        assert call(f"{base}/api/v1/endpoints", token)[0] == 404
        status, schema = call(f"{base}/api/v1/schema?format=json", None)
        assert status == 200
        assert "/api/v1/sources" in schema["paths"]
        assert not [p for p in schema["paths"] if p.startswith("/api/v1/endpoints")]
        # Metrics: the inbox's gauges, none of the sending side's.
        status, metrics = call(f"{base}/metrics", METRICS_TOKEN)
        assert status == 200, metrics
        assert 'receivers_inbox_events{status="processed"} 1.0' in metrics
        assert "webhooks_deliveries{" not in metrics
    pages = ["/admin/receivers/source/", "/admin/receivers/inboxevent/"]
    pages += ["/admin/webhooks_core/apitoken/", "/admin/webhooks_core/auditentry/"]
    assert admin_pages(venv, project, env, pages) == [
        *(f"{page} 200" for page in pages),
        "token page 200 True",
    ]
    # Reconciliation runs there too (no source has a provider API: nothing to ask).
    out = run(
        venv, project / "manage.py", "shell", "-c",
        "from receivers.reconciliation import dispatch_reconciliations\n"
        "print(dispatch_reconciliations())",
        cwd=project, env=env,
    )  # fmt: skip
    assert out.split()[-1] == "0"


def test_a_host_that_only_sends(
    tmp_path: Path, venv: Path, host_database: str, clean_broker: str
) -> None:
    project, env, token, tables = prepare(tmp_path, venv, host_database, clean_broker, "sending")
    assert {"webhooks_core_apitoken", "deliveries_endpoint", "deliveries_delivery"} <= tables
    assert not {t for t in tables if t.startswith("receivers_")}
    assert not {"deliveries_apitoken", "deliveries_auditentry"} & tables
    run(
        venv, "-c",
        "import django, os, sys; os.environ['DJANGO_SETTINGS_MODULE'] = 'host.settings'; "
        "django.setup(); import deliveries.api.urls, deliveries.admin, deliveries.tasks; "
        "assert not [m for m in sys.modules if m.split('.')[0] == 'receivers'], "
        "sorted(m for m in sys.modules if m.startswith('receivers'))",
        cwd=project, env=env,
    )  # fmt: skip

    with Receiver.running() as peer, serving(venv, project, env, tmp_path / "worker.log") as base:
        status, created = call(
            f"{base}/api/v1/endpoints", token, "POST", {"url": peer.url, "event_types": ["*"]}
        )
        assert status == 201, created
        status, event = call(
            f"{base}/api/v1/events", token, "POST", {"type": "shop.order.paid", "data": {"n": 1}}
        )
        assert status in (201, 202), event
        (request,) = peer.wait_for(1, timeout=WAIT_SECONDS)
        assert signing.verify_v1(
            created["secret"],
            request.headers["X-Webhook-Signature"],
            request.body,
            now=int(time.time()),
        )
        # The receiving side's routes are not there.
        assert call(f"{base}/api/v1/sources", token)[0] == 404
        status, metrics = call(f"{base}/metrics", METRICS_TOKEN)
        assert status == 200, metrics
        assert "webhooks_deliveries{" in metrics
        assert "receivers_inbox_events" not in metrics
    pages = ["/admin/deliveries/endpoint/", "/admin/deliveries/delivery/"]
    pages += ["/admin/webhooks_core/apitoken/", "/admin/webhooks_core/auditentry/"]
    assert admin_pages(venv, project, env, pages) == [
        *(f"{page} 200" for page in pages),
        "token page 200 True",
    ]
