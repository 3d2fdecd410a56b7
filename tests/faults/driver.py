"""Stands in for product code and Celery beat in a process of its own, so that it talks
to the private servers a fault test starts (DATABASE_URL and CELERY_BROKER_URL come from
its environment, not from the test process's settings).

    python -m tests.faults.driver emit <type> <count>   # prints the event ids as JSON
    python -m tests.faults.driver sweep <interval>     # beat: sweeps until terminated
    python -m tests.faults.driver setup <receiver-url> # prints token, source, secret
"""

import json
import logging
import os
import signal
import sys
import time
from types import FrameType

import django

PER_TRANSACTION = 50


def emit(event_type: str, count: int) -> None:
    from django.db import transaction

    from deliveries import services

    ids: list[str] = []
    for start in range(0, count, PER_TRANSACTION):
        with transaction.atomic():
            batch = range(start, min(start + PER_TRANSACTION, count))
            ids += [str(services.emit(event_type, {"n": n}).id) for n in batch]
    print(json.dumps(ids))


def sweep(interval: float) -> None:
    from django.db import connection

    from deliveries import services

    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    while not stopping:
        try:
            services.sweep()
        except Exception as exc:  # a beat run fails while a server is down; the next retries
            logging.getLogger("faults.driver").warning("sweep failed: %s", exc)
            connection.close()
        time.sleep(interval)


def setup(receiver_url: str) -> None:
    from deliveries import services
    from deliveries.models import ApiToken
    from receivers import services as receiver_services
    from tests.faults.checks import FAST_POLICY

    services.endpoint_create(url=receiver_url, event_types=["*"], **FAST_POLICY)
    _, token = ApiToken.issue("faults")
    source, secret = receiver_services.source_create(slug="faults", scheme="ours")
    print(json.dumps({"token": token, "source": source.slug, "secret": secret}))


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webhooks_project.settings")
    django.setup()
    import tests.event_catalogue  # noqa: F401  (declares the types the scenarios emit)

    command, *args = argv
    if command == "emit":
        emit(args[0], int(args[1]))
    elif command == "sweep":
        sweep(float(args[0]))
    elif command == "setup":
        setup(args[0])
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
