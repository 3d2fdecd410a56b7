"""Celery tasks of tenant erasure (deliveries/operator/erasure.py): a run per erasure,
started once the request commits, and a periodic resume (beat) of every erasure still
running, so a crash or a lost message only delays it."""

from typing import Any

from deliveries import conf
from deliveries.operator import erasure
from webhooks_core.runtime.tasking import QUEUE_MAINTENANCE, every, periodic, webhook_task


@webhook_task("deliveries.erasure.run", queue=QUEUE_MAINTENANCE)
def run_erasure(erasure_id: int) -> str:
    return erasure.tenant_erasure_run(erasure_id=erasure_id)


@webhook_task("deliveries.erasure.resume", queue=QUEUE_MAINTENANCE)
def resume_erasures() -> int:
    return erasure.tenant_erasures_resume()


@periodic
def beat_entries() -> dict[str, dict[str, Any]]:
    return {
        "deliveries-resume-erasures": every(
            "deliveries.erasure.resume", conf.get().sweep_interval_seconds
        )
    }
