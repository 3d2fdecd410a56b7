"""The distribution, installed into a fresh virtual environment, in a project made
by ``django-admin startproject`` plus only the lines the README's "Add to an existing Django
project" names, sends and receives webhooks end to end.

The wheel is built from this checkout and installed with the locked versions from uv's
cache (``--offline``: ``bin/setup`` filled the cache), so no network is needed.
"""

import json
import os
import shutil
import socket
import subprocess
import textwrap
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from deliveries import signing
from tests.receiver import Receiver

REPO = Path(__file__).resolve().parents[2]
QUEUES = "webhooks.fanout,webhooks.delivery,webhooks.inbox,webhooks.maintenance"
STEP_TIMEOUT = 180
WAIT_SECONDS = 60.0

pytestmark = [pytest.mark.worker, pytest.mark.timeout(600)]


def _uv() -> str | None:
    found = shutil.which("uv")
    local = REPO / ".tools" / "bin" / "uv"
    return found or (str(local) if local.exists() else None)


def run(*command: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, command))} failed ({result.returncode}):\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result.stdout


def wait_until(check: Callable[[], Any], what: str, timeout: float = WAIT_SECONDS) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- the host project ------------------------------------------------------------------

CELERY_PY = """
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "host.settings")

app = Celery("host")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
"""

INIT_PY = """
from .celery import app as celery_app

__all__ = ("celery_app",)
"""

SHOP_FILES = {
    "__init__.py": "",
    "models.py": '''
        from django.db import models


        class Order(models.Model):
            total = models.PositiveIntegerField()


        class Receipt(models.Model):
            """What the host's receiving handler did with an inbox event."""

            event_type = models.CharField(max_length=100)
            order_id = models.PositiveIntegerField()
    ''',
    "signals.py": """
        from django.dispatch import Signal

        order_paid = Signal()
    """,
    "webhook_events.py": """
        from deliveries.catalogue import Version, declare

        SCHEMA = {
            "type": "object",
            "properties": {"order_id": {"type": "integer"}, "total": {"type": "integer"}},
            "required": ["order_id"],
        }
        for name in ("shop.order.created", "shop.order.paid", "shop.order.shipped"):
            declare(
                name,
                description=name,
                versions=[Version(1, schema=SCHEMA, example={"order_id": 1, "total": 5})],
            )
    """,
    "apps.py": """
        from django.apps import AppConfig


        class ShopConfig(AppConfig):
            name = "shop"
            default_auto_field = "django.db.models.BigAutoField"

            def ready(self):
                from deliveries.bindings import bind_model, bind_signal

                from .models import Order
                from .signals import order_paid

                bind_model(
                    Order,
                    created="shop.order.created",
                    serializer=lambda order: {"order_id": order.pk, "total": order.total},
                )
                bind_signal(
                    order_paid,
                    "shop.order.paid",
                    data=lambda sender, order, **kwargs: {"order_id": order.pk},
                )
    """,
    "handlers.py": """
        from receivers.handlers import inbox_handler

        from .models import Receipt


        @inbox_handler("shop.order.*")
        def record(event):
            Receipt.objects.create(
                event_type=event.type, order_id=event.payload["data"]["order_id"]
            )
    """,
    "services.py": """
        from django.db import transaction

        from deliveries.services import emit

        from .models import Order
        from .signals import order_paid


        def place_order(total):
            with transaction.atomic():
                order = Order.objects.create(total=total)
                order_paid.send(sender=Order, order=order)
                emit("shop.order.shipped", {"order_id": order.pk})
            return order.pk
    """,
}


def write_host(root: Path, python: Path, database: str, broker: str) -> Path:
    project = root / "hostproject"
    project.mkdir()
    run(python, "-m", "django", "startproject", "host", project)
    package = project / "host"
    settings_py = package / "settings.py"
    # Exactly the README's steps, plus this test's own app and services.
    settings_py.write_text(
        settings_py.read_text()
        + textwrap.dedent(f"""
            INSTALLED_APPS += ["webhooks_core", "deliveries", "receivers", "shop"]
            CELERY_BROKER_URL = {broker!r}
            RECEIVERS_HANDLER_MODULES = ["shop.handlers"]
            DATABASES = {{
                "default": {{
                    "ENGINE": "django.db.backends.postgresql",
                    "NAME": {database!r},
                    "USER": "postgres",
                    "HOST": "127.0.0.1",
                    "PORT": 5432,
                }}
            }}
        """)
    )
    urls_py = package / "urls.py"
    urls = urls_py.read_text() + textwrap.dedent("""
        from django.urls import include

        urlpatterns += [
            path("api/v1/", include("deliveries.api.urls")),
            path("receivers/", include("receivers.urls")),
        ]
    """)
    urls_py.write_text(urls)
    (package / "celery.py").write_text(CELERY_PY.lstrip())
    (package / "__init__.py").write_text(INIT_PY.lstrip())
    shop = project / "shop"
    shop.mkdir()
    for name, text in SHOP_FILES.items():
        (shop / name).write_text(textwrap.dedent(text).lstrip())
    return project


def query(database: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{database}") as conn:
        return conn.execute(sql).fetchall()


def test_a_startproject_host_sends_and_receives(
    tmp_path: Path, venv: Path, host_database: str, clean_broker: str
) -> None:
    # The distribution holds the apps and nothing of this repository's own.
    listing = run(
        venv, "-c", "import importlib.util as u; print([m for m in "
        "('deliveries', 'receivers', 'webhooks_core', 'webhooks_project', 'demo_shop', "
        "'examples', 'tests', 'bench') if u.find_spec(m)])", cwd=tmp_path,
    )  # fmt: skip
    assert listing.strip() == "['deliveries', 'receivers', 'webhooks_core']"

    project = write_host(tmp_path, venv, host_database, clean_broker)
    # Only what a host has: its own directory on the path, none of our environment.
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(project)}
    manage = (venv, project / "manage.py")
    run(*manage, "makemigrations", "shop", cwd=project, env=env)
    run(*manage, "migrate", "--noinput", cwd=project, env=env)
    tables = {row[0] for row in query(host_database, "SELECT tablename FROM pg_tables")}
    assert {"deliveries_endpoint", "deliveries_delivery", "receivers_inboxevent"} <= tables
    assert not {t for t in tables if t.startswith(("payments_", "demo_shop_"))}
    assert not {"receivers_order", "receivers_payment", "receivers_paymenttransition"} & tables
    # System checks pass with DEBUG on, as startproject leaves it.
    run(*manage, "check", "--fail-level", "ERROR", cwd=project, env=env)

    with Receiver.running() as peer:
        endpoint_secret = run(
            *manage, "shell", "-c",
            "from deliveries.services import endpoint_create\n"
            f"_, secret = endpoint_create(url={peer.url!r}, event_types=['*'])\n"
            "print(secret)",
            cwd=project, env=env,
        ).splitlines()[-1]  # fmt: skip
        source_secret = run(
            *manage, "shell", "-c",
            "from receivers.services import source_create\n"
            "_, secret = source_create(slug='partner', scheme='ours')\n"
            "print(secret)",
            cwd=project, env=env,
        ).splitlines()[-1]  # fmt: skip
        web_port = free_port()
        beat_log = tmp_path / "beat.log"
        processes = [
            subprocess.Popen(
                [str(venv), "-m", "celery", "-A", "host", "beat", "--loglevel", "INFO",
                 "--schedule", str(tmp_path / "beat-schedule")],
                cwd=project, env=env, stdout=beat_log.open("w"), stderr=subprocess.STDOUT,
            ),
            subprocess.Popen(
                [str(venv), "-m", "celery", "-A", "host", "worker", "-Q", QUEUES,
                 "--pool", "threads", "--concurrency", "4", "--loglevel", "WARNING"],
                cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ),
            subprocess.Popen(
                [*map(str, manage), "runserver", "--noreload", f"127.0.0.1:{web_port}"],
                cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ),
        ]  # fmt: skip
        try:
            # Sending: emit() and both bindings inside the host's own transaction.
            run(
                *manage, "shell", "-c", "from shop.services import place_order; place_order(7)",
                cwd=project, env=env,
            )  # fmt: skip
            arrived = peer.wait_for(3, timeout=WAIT_SECONDS)
            now = int(time.time())
            types = set()
            for request in arrived:
                header = request.headers["X-Webhook-Signature"]
                assert signing.verify_v1(endpoint_secret, header, request.body, now=now)
                types.add(json.loads(request.body)["type"])
            assert types == {"shop.order.created", "shop.order.paid", "shop.order.shipped"}

            # Receiving: a signed request to the host's receiver URL, processed by the
            # host's handler.
            body = json.dumps(
                {"id": "evt_partner_1", "type": "shop.order.paid", "data": {"order_id": 41}}
            ).encode()
            headers = signing.signature_headers(
                [source_secret], msg_id="evt_partner_1", timestamp=int(time.time()), body=body
            )
            url = f"http://127.0.0.1:{web_port}/receivers/partner/"

            def post() -> int:
                request = urllib.request.Request(
                    url,
                    data=body,
                    headers={"Content-Type": "application/json", **headers},
                    method="POST",
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
                    query(
                        host_database,
                        "SELECT status FROM receivers_inboxevent WHERE event_id = 'evt_partner_1'",
                    )
                    == [("processed",)]
                ),
                "the inbox event to be processed",
            )
            assert query(host_database, "SELECT event_type, order_id FROM shop_receipt") == [
                ("shop.order.paid", 41)
            ]

            # Beat runs the apps' periodic tasks from a schedule the host never wrote (the
            # sweepers are due every 15 s by default).
            wait_until(
                lambda: all(
                    f"Sending due task {name}" in beat_log.read_text()
                    for name in ("deliveries-sweep", "receivers-sweep")
                ),
                "beat to send the sweepers",
            )
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
