"""Celery wiring the apps bring along, so a host's Celery app (as Celery's Django guide
writes it) needs no routes, task options or beat schedule of its own.

* Every task names its queue and carries the at-least-once options (``webhook_task``): a
  message is acknowledged only after its task ran, and one whose worker died is given
  back. Every task is idempotent (it claims a row first), so running one twice is safe.
* Each app declares its periodic tasks (``periodic``); they are merged into the running
  Celery app's ``beat_schedule`` when Django starts (the apps' ``ready()``, which runs
  before ``celery beat`` builds its scheduler) and, should that app not be the current one
  then, when beat starts (``beat_init``). Entries a host declares under the same name win.
* The prefetch multiplier and the broker's visibility timeout are worker and broker
  settings, not task options: the system check ``webhooks.E020`` / ``webhooks.W020``
  reports values that break the guarantees.
"""

from collections.abc import Callable, Sequence
from typing import Any

from celery import Celery, current_app, shared_task, signals
from django.apps import AppConfig
from django.core.checks import CheckMessage, Error, Tags, Warning, register

from webhooks_core import conf
from webhooks_core.check_ids import check_id

QUEUE_FANOUT = "webhooks.fanout"
QUEUE_DELIVERY = "webhooks.delivery"
QUEUE_INBOX = "webhooks.inbox"
QUEUE_MAINTENANCE = "webhooks.maintenance"
QUEUES = (QUEUE_FANOUT, QUEUE_DELIVERY, QUEUE_INBOX, QUEUE_MAINTENANCE)

#: What each task carries, whatever the host's CELERY_TASK_* settings say.
AT_LEAST_ONCE = {"acks_late": True, "reject_on_worker_lost": True}

#: kombu's Redis transport default, used when the host sets no visibility_timeout.
REDIS_DEFAULT_VISIBILITY_TIMEOUT = 3600.0

ScheduleProvider = Callable[[], dict[str, dict[str, Any]]]
_providers: list[ScheduleProvider] = []


def webhook_task(name: str, *, queue: str, **options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``shared_task`` with its queue and the at-least-once options (and any other task
    options, such as a time limit of its own)."""
    return shared_task(
        name=name, queue=queue, acks_late=True, reject_on_worker_lost=True, **options
    )


def periodic(provider: ScheduleProvider) -> ScheduleProvider:
    """Declare beat entries; ``provider`` is called when they are installed, so intervals
    come from the settings of the running project."""
    if provider not in _providers:
        _providers.append(provider)
    return provider


def every(task: str, seconds: float, queue: str = QUEUE_MAINTENANCE) -> dict[str, Any]:
    # A run that waited longer than one interval is dropped: the next one does its work.
    return {"task": task, "schedule": seconds, "options": {"expires": seconds, "queue": queue}}


def beat_schedule() -> dict[str, dict[str, Any]]:
    schedule: dict[str, dict[str, Any]] = {}
    for provider in _providers:
        schedule.update(provider())
    return schedule


def install_beat_schedule(app: Celery) -> dict[str, dict[str, Any]]:
    """Add the apps' periodic tasks to ``app``'s schedule; returns the ones added."""
    current = dict(app.conf.beat_schedule or {})
    added = {name: entry for name, entry in beat_schedule().items() if name not in current}
    if added:
        app.conf.beat_schedule = {**current, **added}
    return added


def _current_app() -> Celery:
    # The app itself, not the proxy: its conf is written to.
    return current_app._get_current_object()  # type: ignore[attr-defined]


def install_on_current_app() -> None:
    install_beat_schedule(_current_app())


@signals.beat_init.connect
def _complete_schedule_at_beat_start(sender: Any, **_: Any) -> None:
    # Beat's scheduler may already have read the schedule (an app that was not current
    # when Django started): hand it the missing entries directly.
    install_beat_schedule(sender.app)
    scheduler = sender.scheduler
    missing = {
        name: entry
        for name, entry in sender.app.conf.beat_schedule.items()
        if name in beat_schedule() and name not in scheduler.schedule
    }
    if missing:
        scheduler.update_from_dict(missing)


# --- checks -----------------------------------------------------------------------------


def longest_countdown_seconds() -> float:
    return float(conf.value("WEBHOOKS_MAX_COUNTDOWN_SECONDS"))


@register(Tags.compatibility)
def check_celery_settings(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[CheckMessage]:
    app = _current_app()
    problems: list[CheckMessage] = []
    broker = str(app.conf.broker_url or "")
    if broker.startswith(("redis://", "rediss://")):
        options = app.conf.broker_transport_options or {}
        timeout = float(options.get("visibility_timeout", REDIS_DEFAULT_VISIBILITY_TIMEOUT))
        countdown = longest_countdown_seconds()
        if timeout <= countdown:
            problems.append(
                Error(
                    f"The Redis broker's visibility_timeout ({timeout:g} s) is not longer than "
                    f"WEBHOOKS_MAX_COUNTDOWN_SECONDS ({countdown:g} s): Redis would hand a "
                    "retry waiting for its countdown to a second worker.",
                    hint="Set CELERY_BROKER_TRANSPORT_OPTIONS = {'visibility_timeout': 3600} "
                    "or lower WEBHOOKS_MAX_COUNTDOWN_SECONDS.",
                    id=check_id("webhooks.E020"),
                )
            )
    prefetch = app.conf.worker_prefetch_multiplier
    if prefetch != 1:
        problems.append(
            Warning(
                f"CELERY_WORKER_PREFETCH_MULTIPLIER is {prefetch}: each worker process holds "
                "messages it is not working on, so one slow endpoint's batch waits behind "
                "another's (nothing is lost: unacknowledged messages go back to the broker).",
                hint="Set CELERY_WORKER_PREFETCH_MULTIPLIER = 1 (or start workers with "
                "--prefetch-multiplier 1).",
                id=check_id("webhooks.W020"),
            )
        )
    return problems
