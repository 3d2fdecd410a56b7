"""The Celery application. Configuration lives in settings.py under the CELERY_ prefix.

Database connections: Celery's Django fix-up (active because DJANGO_SETTINGS_MODULE is set
before the app is created) would close the task thread's connections around every task;
with `CELERY_DB_REUSE_MAX` it keeps them, and `close_old_connections` around each task
drops one that is broken (after a database restart) or older than `CONN_MAX_AGE`, as
Django does around each request. So a thread never keeps a broken connection, and does
not pay a reconnect per task.
"""

import os
from typing import Any

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webhooks_project.settings")

app = Celery("webhooks_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["webhooks_project", "deliveries", "receivers"])


@signals.task_prerun.connect
@signals.task_postrun.connect
def _drop_unusable_connections(**_: Any) -> None:
    from django.db import close_old_connections

    close_old_connections()


@signals.worker_ready.connect
@signals.worker_process_init.connect
def _settle_garbage_collection(**_: Any) -> None:
    # What start-up made, out of the collector's sight (webhooks_core/runtime/collector.py).
    from webhooks_core.runtime import collector

    collector.settle_after_start_up(collector.WORKER_YOUNG_GENERATION_THRESHOLD)


@signals.worker_ready.connect
@signals.worker_process_init.connect
def _trace_memory_if_asked(**_: Any) -> None:
    from webhooks_project import memtrace

    memtrace.start_if_asked()
