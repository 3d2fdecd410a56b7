"""Scenario 2: Redis is killed mid-run and comes back empty.

A private redis-server is the broker and the health-counter store of a worker process and
of the process playing product code and beat. When it dies, every queued, reserved and
countdown message dies with it; events emitted during the outage are committed but their
messages cannot be sent. PostgreSQL has the truth, so once Redis is back the sweeper
dispatches what is left and every event arrives.

The worker runs under a supervisor, as in production: on a lost broker connection Celery's
consumer sometimes dies with "Unrecoverable error" inside kombu's Redis transport (it
tries to restore unacknowledged messages through a connection that is already gone), and
the worker process exits. A restarted worker then picks up where it stopped.
"""

import time

import pytest

from deliveries import services
from tests.conftest import wait_until
from tests.faults.checks import (
    FAST_POLICY,
    assert_database_consistent,
    assert_each_arrived_with_its_id,
    delivery_statuses,
    wait_all_succeeded,
)
from tests.faults.processes import driver_running, run_driver, supervised_worker
from tests.faults.servers import PrivateRedis
from tests.helpers import database_url
from tests.receiver import Receiver, Reply

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240)]

REDIS_PORT = 6391
BEFORE, DURING = 200, 30
OUTAGE_SECONDS = 2.0


def distinct_arrivals(receiver: Receiver) -> int:
    return len({r.headers["X-Webhook-Id"] for r in list(receiver.requests)})


def test_redis_restarted_empty_mid_run_loses_nothing(
    transactional_db: None, receiver: Receiver
) -> None:
    services.endpoint_create(url=receiver.url, event_types=["*"], **FAST_POLICY)
    receiver.default = Reply(delay_seconds=0.02)

    with PrivateRedis.running(REDIS_PORT) as broker:
        env = {
            "DATABASE_URL": database_url(),
            "CELERY_BROKER_URL": broker.url,
            "WEBHOOKS_HEALTH_REDIS_URL": broker.url,
            "WEBHOOKS_LEASE_SECONDS": "2",
            "WEBHOOKS_FANOUT_GRACE_SECONDS": "1",
            "WEBHOOKS_WAKE_GRACE_SECONDS": "1",
        }
        started = time.monotonic()
        with supervised_worker(env) as worker_exits, driver_running(["sweep", "0.5"], env):
            event_ids = run_driver(["emit", "order.created", str(BEFORE)], env)
            wait_until(lambda: distinct_arrivals(receiver) >= BEFORE // 3, timeout=90)

            broker.kill()
            # Product code keeps committing while the broker is gone; emit does not fail.
            event_ids += run_driver(["emit", "order.created", str(DURING)], env)
            time.sleep(OUTAGE_SECONDS)
            broker.start()  # empty: no queues, no messages, no counters

            wait_all_succeeded(
                BEFORE + DURING,
                timeout=150,
                what="every delivery to succeed after Redis came back empty",
            )

    arrivals = assert_each_arrived_with_its_id(event_ids, receiver.requests)
    assert_database_consistent(delivery_statuses(), BEFORE + DURING)
    print(
        f"\n{BEFORE + DURING} events, Redis killed and restarted empty: "
        f"{arrivals.requests} requests ({arrivals.repeats} sent again), "
        f"{time.monotonic() - started:.1f} s, worker exits on the way: {worker_exits}"
    )
