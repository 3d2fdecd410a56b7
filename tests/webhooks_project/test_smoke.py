"""The foundation works end to end: Redis carries a task to a real worker, which writes to
PostgreSQL."""

import time

import pytest

from webhooks_project.models import WorkerHeartbeat
from webhooks_project.tasks import heartbeat


@pytest.mark.django_db(transaction=True)
def test_task_travels_through_redis_to_worker_and_writes_postgres(celery_worker: object) -> None:
    heartbeat.delay("smoke-test-host")

    deadline = time.monotonic() + 15
    while not WorkerHeartbeat.objects.filter(hostname="smoke-test-host").exists():
        assert time.monotonic() < deadline, "the worker never wrote the heartbeat row"
        time.sleep(0.05)
