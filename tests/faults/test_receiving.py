"""Scenario 6, the receiving side: duplicates and a crash after the business effect.

- 50 concurrent copies of one signed event, sent to a gunicorn process: every copy gets
  a 2xx, one inbox row is stored and the business effect happens once.
- The worker is SIGKILLed after the handler's effect committed but before the inbox row
  was marked processed. The row's lease expires, the sweeper hands it to a new worker,
  the handler runs again and finds the effect already there: no second effect.
"""

import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
import requests
from django.test import Client

from examples.payments.models import Order, OrderStatus, PaymentTransition
from receivers import services
from receivers.models import InboxEvent, InboxStatus
from tests.conftest import wait_until
from tests.faults import effect_then_crash
from tests.faults.processes import web_process
from tests.helpers import database_url, declare_queues, sweeping_in_background, worker_process
from tests.receivers.helpers import ours_event, sign_ours

pytestmark = [
    pytest.mark.faults,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

COPIES = 50


def payment(version: int) -> dict[str, Any]:
    return {
        "payment_id": "pay_1",
        "order": "ord_52",
        "amount": 500000,
        "currency": "RUB",
        "version": version,
    }


def signed(secret: str, event_type: str, data: dict[str, Any]) -> tuple[str, bytes, dict[str, str]]:
    event_id = str(uuid.uuid4())
    body = ours_event(event_type, data, event_id=event_id)
    return event_id, body, {**sign_ours([secret], body), "Content-Type": "application/json"}


def post(client: Client, slug: str, body: bytes, headers: dict[str, str]) -> None:
    response = client.post(
        f"/receivers/{slug}/", data=body, content_type="application/json", headers=headers
    )
    assert response.status_code == 200, response.content


def status_of(event_id: str) -> str:
    return InboxEvent.objects.get(event_id=event_id).status


def wait_processed(event_id: str, timeout: float = 30.0) -> None:
    wait_until(
        lambda: status_of(event_id) == InboxStatus.PROCESSED, timeout, f"{event_id} processed"
    )


def succeeded_transitions() -> int:
    return PaymentTransition.objects.filter(to_status="succeeded").count()


def test_50_concurrent_copies_make_one_row_and_one_effect(celery_worker: object) -> None:
    Order.objects.create(reference="ord_52", amount=500000, currency="RUB")
    source, secret = services.source_create(slug="faults-copies", scheme="ours")
    created_id, body, headers = signed(secret, "payment.created", payment(1))
    post(Client(), source.slug, body, headers)
    wait_processed(created_id)
    event_id, body, headers = signed(secret, "payment.succeeded", payment(2))

    statuses: list[int] = []
    with web_process({"DATABASE_URL": database_url()}, threads=8) as web:
        barrier = threading.Barrier(COPIES)

        def deliver_a_copy() -> None:
            barrier.wait()
            url = f"{web}/receivers/{source.slug}/"
            statuses.append(requests.post(url, data=body, headers=headers, timeout=60).status_code)

        copies = [threading.Thread(target=deliver_a_copy) for _ in range(COPIES)]
        for copy in copies:
            copy.start()
        for copy in copies:
            copy.join()

    assert statuses == [200] * COPIES
    assert InboxEvent.objects.filter(source=source, event_id=event_id).count() == 1
    wait_processed(event_id)
    time.sleep(0.5)  # room for a second effect, if there were one
    assert succeeded_transitions() == 1
    assert Order.objects.get(reference="ord_52").status == OrderStatus.PAID


def test_worker_killed_after_the_effect_before_processed_repeats_nothing(
    redis_client: redis.Redis, settings: Any, tmp_path: Path
) -> None:
    redis_client.flushdb()
    declare_queues()
    settings.RECEIVERS_REDISPATCH_GRACE_SECONDS = 1.0  # the sweeper runs in this process
    marker = tmp_path / "effects.log"
    worker_env = {
        "RECEIVERS_HANDLER_MODULES": f"examples.payments.handlers,{effect_then_crash.__name__}",
        "RECEIVERS_LEASE_SECONDS": "3",
        "RECEIVERS_BACKOFF_BASE_SECONDS": "0.05",
        "RECEIVERS_BACKOFF_MAX_SECONDS": "0.2",
        effect_then_crash.MARKER_ENV: str(marker),
    }
    Order.objects.create(reference="ord_52", amount=500000, currency="RUB")
    source, secret = services.source_create(slug=effect_then_crash.SOURCE_SLUG, scheme="ours")
    client = Client()

    def effects() -> list[str]:
        return marker.read_text().splitlines() if marker.exists() else []

    with worker_process(worker_env) as doomed:
        created_id, body, headers = signed(secret, "payment.created", payment(1))
        post(client, source.slug, body, headers)
        wait_processed(created_id, timeout=60)
        event_id, body, headers = signed(secret, "payment.succeeded", payment(2))
        post(client, source.slug, body, headers)
        wait_until(effects, timeout=60, what="the business effect to commit")
        os.kill(doomed.pid, signal.SIGKILL)  # effect committed, row not yet marked
        doomed.wait()
    assert effects() == ["attempt 1: changed"]
    assert status_of(event_id) == InboxStatus.PROCESSING
    assert succeeded_transitions() == 1

    with (
        worker_process(worker_env),
        sweeping_in_background(sweeps=[services.inbox_sweep]),
    ):
        wait_processed(event_id, timeout=90)
        time.sleep(1.0)  # room for a duplicate run, if there were one
    assert effects() == ["attempt 1: changed", "attempt 2: stale"]
    assert succeeded_transitions() == 1
    assert Order.objects.get(reference="ord_52").status == OrderStatus.PAID
