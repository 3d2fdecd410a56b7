"""Scenario 3: PostgreSQL goes down mid-run and comes back.

Everything runs against a private cluster: a gunicorn web process, a Celery worker, and
the driver process playing product code and beat. While the database is down, `emit`
raises and writes nothing, and the API and the receiver URL answer 503 with a JSON body
and Retry-After (never a 500 or a stack trace). Once it is back, every event emitted
before the outage arrives, and the database ends with every delivery succeeded.
"""

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections import Counter

import psycopg
import pytest
import requests
from psycopg import sql

from deliveries.models import Delivery, Event
from receivers.models import InboxEvent
from tests.conftest import wait_until
from tests.faults.checks import assert_database_consistent, assert_each_arrived_with_its_id
from tests.faults.processes import DriverFailed, driver_running, run_driver, web_process
from tests.faults.servers import PrivatePostgres, PrivateRedis
from tests.helpers import worker_process
from tests.receiver import Receiver, Reply
from tests.receivers.helpers import ours_event, sign_ours

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

PG_PORT = 5441
REDIS_PORT = 6392
EVENTS = 120
OUTAGE_SECONDS = 1.0


def _query(database_url: str, query: sql.Composed) -> list[tuple[object, ...]]:
    with psycopg.connect(database_url, connect_timeout=2) as conn:
        return conn.execute(query).fetchall()


def delivery_statuses(database_url: str) -> Counter[str]:
    query = sql.SQL("SELECT status, count(*) FROM {} GROUP BY status").format(
        sql.Identifier(Delivery._meta.db_table)
    )
    with contextlib.suppress(psycopg.OperationalError):
        return Counter({str(status): int(str(n)) for status, n in _query(database_url, query)})
    return Counter()


def rows(database_url: str, table: str) -> int:
    query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
    return int(str(_query(database_url, query)[0][0]))


def assert_unavailable(response: requests.Response) -> None:
    assert response.status_code == 503, (response.status_code, response.text[:300])
    assert response.headers["Retry-After"].isdigit()
    assert "detail" in response.json()
    assert "Traceback" not in response.text


def test_postgres_restarted_mid_run(receiver: Receiver) -> None:
    receiver.default = Reply(delay_seconds=0.05)
    with (
        PrivatePostgres.running(PG_PORT) as postgres,
        PrivateRedis.running(REDIS_PORT) as broker,
    ):
        database_url = postgres.create_database("webhooks")
        env = {
            "DATABASE_URL": database_url,
            "CELERY_BROKER_URL": broker.url,
            "WEBHOOKS_HEALTH_REDIS_URL": broker.url,
            "WEBHOOKS_LEASE_SECONDS": "2",
            "WEBHOOKS_FANOUT_GRACE_SECONDS": "1",
            "WEBHOOKS_WAKE_GRACE_SECONDS": "1",
        }
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "--skip-checks", "-v", "0"],
            env={**os.environ, **env},
            check=True,
            timeout=120,
        )
        setup = run_driver(["setup", receiver.url], env)
        auth = {"Authorization": f"Bearer {setup['token']}"}
        inbound = ours_event("faults.ping", {"n": 1}, event_id=str(uuid.uuid4()))
        inbound_headers = {
            **sign_ours([setup["secret"]], inbound),
            "Content-Type": "application/json",
        }

        with (
            web_process(env) as web,
            worker_process(env),
            driver_running(["sweep", "0.5"], env),
        ):
            event_ids = run_driver(["emit", "order.created", str(EVENTS)], env)
            wait_until(lambda: len(receiver.requests) >= EVENTS // 4, timeout=90)

            postgres.stop()
            arrived_before_outage = {r.headers["X-Webhook-Id"] for r in list(receiver.requests)}
            assert len(arrived_before_outage) < EVENTS, "the outage must come mid-run"
            with pytest.raises(DriverFailed) as failed:
                run_driver(["emit", "order.created", "5"], env)
            assert "OperationalError" in failed.value.stderr
            assert_unavailable(requests.get(f"{web}/api/v1/events", headers=auth, timeout=10))
            assert_unavailable(
                requests.post(
                    f"{web}/api/v1/events",
                    json={"type": "order.created", "data": {"n": -1}},
                    headers=auth,
                    timeout=10,
                )
            )
            receiver_url = f"{web}/receivers/{setup['source']}/"
            assert_unavailable(
                requests.post(receiver_url, data=inbound, headers=inbound_headers, timeout=10)
            )
            time.sleep(OUTAGE_SECONDS)  # the worker's retries and the sweeps meet it too
            postgres.start()

            wait_until(
                lambda: delivery_statuses(database_url).get("succeeded") == EVENTS,
                timeout=150,
                what="every delivery to succeed after PostgreSQL came back",
            )
            # The refused inbound event is stored once the provider delivers it again.
            resent = requests.post(receiver_url, data=inbound, headers=inbound_headers, timeout=10)
            assert resent.status_code == 200, resent.text
            assert requests.get(f"{web}/api/v1/events", headers=auth, timeout=10).ok

        assert_database_consistent(delivery_statuses(database_url), EVENTS)
        # Nothing written while the database was down: neither the failed emit's events
        # nor the refused API call's; the inbox holds only the event delivered again.
        assert rows(database_url, Event._meta.db_table) == EVENTS
        assert rows(database_url, InboxEvent._meta.db_table) == 1
    arrivals = assert_each_arrived_with_its_id(event_ids, receiver.requests)
    print(
        f"\n{EVENTS} events, PostgreSQL stopped and restarted mid-run: "
        f"{arrivals.requests} requests ({arrivals.repeats} sent again)"
    )
