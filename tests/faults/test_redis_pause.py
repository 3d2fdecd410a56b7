"""Redis stops taking writes for 3 s (`CLIENT PAUSE 3000 WRITE`) in the middle of 150 events
to 5 endpoints: wakes, marks and rate counters block or fail meanwhile, and once Redis
writes again every delivery arrives within 60 s of the last emit (the database holds
every delivery, so a stalled Redis may only delay them). A private redis-server is the
broker and the counters' store, so the pause touches nothing else on the machine."""

import threading
import time

import pytest
import redis

from deliveries import services
from tests.conftest import wait_until
from tests.faults.checks import FAST_POLICY, assert_each_arrived_with_its_id, wait_all_succeeded
from tests.faults.processes import driver_running, run_driver, supervised_worker
from tests.faults.servers import PrivateRedis
from tests.helpers import database_url
from tests.receiver import Receiver, Reply

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240)]

REDIS_PORT = 6393
ENDPOINTS, EVENTS = 5, 150


def test_a_redis_write_pause_mid_run_delays_no_delivery_past_a_minute(
    transactional_db: None, receiver: Receiver
) -> None:
    for _ in range(ENDPOINTS):
        services.endpoint_create(url=receiver.url, event_types=["*"], **FAST_POLICY)
    receiver.default = Reply(delay_seconds=0.01)

    with PrivateRedis.running(REDIS_PORT) as broker:
        env = {
            "DATABASE_URL": database_url(),
            "CELERY_BROKER_URL": broker.url,
            "WEBHOOKS_HEALTH_REDIS_URL": broker.url,
            "WEBHOOKS_FANOUT_GRACE_SECONDS": "2",
            "WEBHOOKS_WAKE_GRACE_SECONDS": "2",
        }
        client = redis.Redis.from_url(broker.url)
        with supervised_worker(env), driver_running(["sweep", "1.0"], env):
            event_ids = run_driver(["emit", "order.created", str(EVENTS // 2)], env)
            wait_until(lambda: len(receiver.requests) >= 20, timeout=60, what="a first few")
            pause = threading.Thread(
                target=lambda: client.execute_command("CLIENT", "PAUSE", 3000, "WRITE")
            )
            pause.start()
            event_ids += run_driver(["emit", "order.created", str(EVENTS - EVENTS // 2)], env)
            last_emit = time.monotonic()
            pause.join()
            wait_all_succeeded(
                EVENTS * ENDPOINTS, timeout=60, what="every delivery within 60 s of the last emit"
            )
            took = time.monotonic() - last_emit
        client.close()

    assert took <= 60
    assert_each_arrived_with_its_id(event_ids, receiver.requests)
    print(f"\n{EVENTS} events x {ENDPOINTS} endpoints, Redis paused 3 s: all in {took:.1f} s")
