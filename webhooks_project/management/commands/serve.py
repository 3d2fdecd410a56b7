"""Run the whole product in one process: web server, Celery worker and beat.

This is the embedded default's entry point (`make run`): with no DATABASE_URL and no
CELERY_BROKER_URL it needs no server at all, because SQLite and Celery's in-process
`memory://` broker live inside this process. With a real broker it still works, as a
single-box deployment; the Procfile is the way to run the processes separately.
"""

import logging
import os
import secrets
import threading
from typing import Any

from celery.beat import EmbeddedService
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from webhooks_core.runtime.tasking import QUEUES
from webhooks_project.celery import app as celery_app

ALL_QUEUES = list(QUEUES)

# Celery's bookkeeping: a line per task received and per task finished, a line per periodic
# task beat sends (every sweep), kombu's note that memory:// has no host name. On this
# console they bury what a newcomer watches: attempts, receipts, problems. Their warnings
# and errors (a task that failed, beat that cannot send) still show.
BOOKKEEPING_LOGGERS = {
    "celery.worker.strategy": logging.WARNING,
    "celery.app.trace": logging.WARNING,
    "celery.beat": logging.WARNING,
    "celery.worker.consumer.connection": logging.WARNING,
    "kombu.connection": logging.ERROR,
}


class Command(BaseCommand):
    help = "Run web server, Celery worker and beat in one process (the embedded default)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--concurrency", type=int, default=4)
        parser.add_argument(
            "--no-demo",
            action="store_true",
            help="Do not seed the demo shop and its endpoint to our own receiver.",
        )

    def handle(
        self, *args: Any, addrport: str, concurrency: int, no_demo: bool, **options: Any
    ) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        login = self.ensure_superuser()
        host = addrport if ":" in addrport else f"127.0.0.1:{addrport}"
        if not no_demo:
            self.seed_demo(host)
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        beat: Any = EmbeddedService(
            celery_app, thread=True, schedule_filename=str(settings.VAR_DIR / "celerybeat-schedule")
        )
        for name, level in BOOKKEEPING_LOGGERS.items():
            logging.getLogger(name).setLevel(level)
        with start_worker(
            celery_app,
            pool="threads",
            concurrency=concurrency,
            queues=ALL_QUEUES,
            loglevel="INFO",
            perform_ping_check=False,
            shutdown_timeout=30.0,
        ):
            beat.start()
            if not no_demo:
                self.start_demo_activity()
            self.say(
                self.style.SUCCESS(
                    f"\nWebhooks platform running.\n"
                    f"  Admin:  http://{host}/admin/   ({login})\n"
                    f"  API:    http://{host}/api/v1/  (token: python manage.py "
                    f"create_api_token <name>)\n"
                    f"  Broker: {settings.CELERY_BROKER_URL.split('@')[-1]}   "
                    f"Database: {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}\n"
                )
            )
            try:
                call_command("runserver", addrport, use_reloader=False, use_threading=True)
            finally:
                beat.stop()

    def say(self, text: str) -> None:
        """Write a line and flush it: redirected to a file or a pipe, stdout is block-buffered,
        and the server then runs for hours, so the first run's password stayed unseen."""
        self.stdout.write(text)
        self.stdout.flush()

    def seed_demo(self, host: str) -> None:
        """The demo endpoint, aimed at this very server's receiver, and two tenants with
        an endpoint each (idempotent); prints a portal link for the first tenant."""
        from examples.demo_shop.demo import demo_portal_link, demo_setup, demo_tenants_setup

        reachable = host.replace("0.0.0.0:", "127.0.0.1:").replace("[::]:", "[::1]:")
        endpoint = demo_setup(base_url=f"http://{reachable}")
        tenants = demo_tenants_setup(base_url=f"http://{reachable}")
        self.say(
            f"Demo: orders and invoices of the demo shop are sent to {endpoint.url} "
            f"(every third event fails once, then succeeds); --no-demo to skip.\n"
            f"Tenants {', '.join(tenants)} have an endpoint each. The portal of "
            f"{next(iter(tenants))} (one-time link, valid for a day):\n"
            f"  {demo_portal_link(base_url=f'http://{reachable}')}"
        )

    def start_demo_activity(self) -> None:
        from examples.demo_shop.demo import demo_activity, demo_tenant_activity

        def run() -> None:
            try:
                demo_tenant_activity()
                demo_activity()
            except Exception:
                self.stderr.write("demo activity failed (the platform keeps running)")
                raise

        # After a short pause, so the web server is listening when the first delivery goes.
        timer = threading.Timer(3.0, run)
        timer.daemon = True
        timer.start()

    def ensure_superuser(self) -> str:
        """Create the first superuser from the environment, or with a printed password."""
        user_model = get_user_model()
        username = os.environ.get("DJANGO_SUPERUSER_USERNAME", "admin")
        if user_model.objects.filter(is_superuser=True).exists():
            return "log in with your superuser"
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD", "")
        generated = not password
        password = password or secrets.token_urlsafe(12)
        user_model.objects.create_superuser(username=username, email="", password=password)
        if generated:
            return (
                f"user {username!r}, password {password!r} (generated, shown this once; "
                f"change it: python manage.py changepassword {username})"
            )
        return f"user {username!r}, password from DJANGO_SUPERUSER_PASSWORD"
