"""What the apps bring along so a host needs none of this repository's settings.

The end-to-end proof is tests/packaging/test_installable.py; these pin the parts one by one.
"""

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from django.core.cache import cache
from django.test import override_settings
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from deliveries import conf as deliveries_conf
from deliveries import tasks as deliveries_tasks
from deliveries.models import ApiToken
from receivers import conf as receivers_conf
from receivers import tasks as receivers_tasks
from tests.fixtures import api_client
from webhooks_core import checks, conf
from webhooks_core.runtime import tasking
from webhooks_project.celery import app as project_app

REPO = Path(__file__).resolve().parents[2]
APP_DIRS = ("deliveries", "receivers", "webhooks_core")
SETTING_NAME = re.compile(r"\b((?:WEBHOOKS|RECEIVERS|METRICS)_[A-Z_]+)\b")


def ids(problems: list[Any]) -> set[str]:
    return {p.id for p in problems}


# --- the settings registry -------------------------------------------------------------


def test_every_setting_the_apps_name_has_exactly_one_registry_entry() -> None:
    names = [setting.name for setting in conf.all_settings()]
    assert len(names) == len(set(names))
    mentioned = set()
    for app in APP_DIRS:
        for path in (REPO / app).rglob("*.py"):
            if "migrations" not in path.parts:
                mentioned |= set(SETTING_NAME.findall(path.read_text()))
    assert mentioned - set(names) == set()
    assert all(setting.doc.strip() for setting in conf.all_settings())


def test_the_apps_read_settings_only_through_their_accessors() -> None:
    for app in APP_DIRS:
        for path in (REPO / app).rglob("*.py"):
            if path.name == "conf.py" or "migrations" in path.parts:
                continue
            text = path.read_text()
            assert not re.search(r"settings\.(WEBHOOKS|RECEIVERS|METRICS|QUEUE)_", text), path
            assert 'getattr(settings, "' not in text, path


def test_defaults_apply_when_the_host_sets_nothing(settings: Settings) -> None:
    for setting in conf.all_settings():
        if hasattr(settings, setting.name):
            delattr(settings, setting.name)
    settings.DEBUG = False
    delivery = deliveries_conf.get()
    assert delivery.lease_seconds == 30.0
    assert conf.scheduling().sweep_interval_seconds == 15.0
    guard = conf.ssrf()
    assert guard.allowed_networks == ()
    assert guard.require_https is True
    assert receivers_conf.get().handler_modules == ()  # never the examples' handlers
    settings.DEBUG = True
    assert conf.ssrf().allowed_networks == ("127.0.0.0/8", "::1")
    assert conf.ssrf().require_https is False


def test_a_host_setting_wins(settings: Settings) -> None:
    settings.WEBHOOKS_LEASE_SECONDS = 7.0
    settings.RECEIVERS_MAX_ATTEMPTS = 3
    assert deliveries_conf.get().lease_seconds == 7.0
    assert receivers_conf.get().max_attempts == 3


# --- checks ----------------------------------------------------------------------------


def test_missing_encryption_key_is_refused_outside_debug(settings: Settings) -> None:
    settings.DEBUG = False
    settings.WEBHOOKS_ENCRYPTION_KEY = ""
    assert ids(checks.check_encryption_key(None)) == {"webhooks.E002"}
    del settings.WEBHOOKS_ENCRYPTION_KEY  # a host that never heard of it
    assert ids(checks.check_encryption_key(None)) == {"webhooks.E002"}
    settings.DEBUG = True
    assert checks.check_encryption_key(None) == []
    settings.DEBUG = False
    settings.WEBHOOKS_ENCRYPTION_KEY = "x"
    assert checks.check_encryption_key(None) == []


def test_visibility_timeout_must_outlast_the_longest_countdown(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.WEBHOOKS_MAX_COUNTDOWN_SECONDS = 60.0
    app = Celery("a_host", set_as_current=False)
    app.conf.update(
        broker_url="redis://127.0.0.1:6379/3",
        worker_prefetch_multiplier=1,
        broker_transport_options={"visibility_timeout": 30},
    )
    monkeypatch.setattr(tasking, "_current_app", lambda: app)
    assert ids(tasking.check_celery_settings(None)) == {"webhooks.E020"}
    app.conf.broker_transport_options = {}  # kombu's default: an hour
    assert tasking.check_celery_settings(None) == []
    app.conf.worker_prefetch_multiplier = 4  # Celery's default
    assert ids(tasking.check_celery_settings(None)) == {"webhooks.W020"}


# --- Celery: routes, task options, beat --------------------------------------------------


@pytest.mark.parametrize(
    ("task", "queue"),
    [
        (deliveries_tasks.fan_out_events, "webhooks.fanout"),
        (deliveries_tasks.work_endpoint, "webhooks.delivery"),
        (deliveries_tasks.sweep, "webhooks.maintenance"),
        (deliveries_tasks.purge, "webhooks.maintenance"),
        (deliveries_tasks.run_replay, "webhooks.maintenance"),
        (deliveries_tasks.resume_stalled_replays, "webhooks.maintenance"),
        (deliveries_tasks.validate_endpoint, "webhooks.maintenance"),
        (deliveries_tasks.validate_endpoints_due, "webhooks.maintenance"),
        (receivers_tasks.process_inbox_event, "webhooks.inbox"),
        (receivers_tasks.process_inbox_events, "webhooks.inbox"),
        (receivers_tasks.sweep, "webhooks.maintenance"),
        (receivers_tasks.reconcile_all, "webhooks.maintenance"),
        (receivers_tasks.reconcile_source, "webhooks.maintenance"),
    ],
)
def test_tasks_carry_their_queue_and_at_least_once_options(task: Any, queue: str) -> None:
    assert project_app.conf.task_routes in (None, {}, [], ())  # nothing routed by the host
    assert project_app.conf.task_acks_late is False  # the project sets none of them
    assert task.queue == queue
    assert task.acks_late is True
    assert task.reject_on_worker_lost is True
    route = project_app.amqp.router.route(task._get_exec_options(), task.name)
    assert route["queue"].name == queue


def test_beat_schedule_comes_from_the_apps() -> None:
    app = Celery("a_host", set_as_current=False)
    app.conf.beat_schedule = {"hosts-own": {"task": "x", "schedule": 5.0}}
    added = tasking.install_beat_schedule(app)
    assert set(added) == {
        "deliveries-sweep",
        "deliveries-resume-stalled-replays",
        "deliveries-purge",
        "deliveries-validate-endpoints-due",
        "deliveries-resume-erasures",
        "receivers-sweep",
        "receivers-reconcile",
    }
    assert "hosts-own" in app.conf.beat_schedule
    assert app.conf.beat_schedule["receivers-reconcile"]["options"]["queue"] == (
        "webhooks.maintenance"
    )
    assert tasking.install_beat_schedule(app) == {}  # idempotent
    # The project's own app got them when Django started.
    assert set(added) <= set(project_app.conf.beat_schedule)


def test_beat_started_on_an_app_that_missed_the_install_gets_the_entries() -> None:
    from celery.beat import Scheduler, Service

    app = Celery("late_host", set_as_current=False)
    service = Service(app, scheduler_cls=Scheduler)
    assert "deliveries-sweep" not in service.scheduler.schedule
    tasking._complete_schedule_at_beat_start(sender=service)
    assert {"deliveries-sweep", "receivers-sweep"} <= set(service.scheduler.schedule)


# --- DRF: the host's REST_FRAMEWORK changes nothing of our API ---------------------------

HOSTILE_DRF = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 1,
    "EXCEPTION_HANDLER": "rest_framework.views.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.BrowsableAPIRenderer"],
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.AnonRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"anon": "1/day"},
}


@pytest.fixture
def throttle_history() -> Iterator[None]:
    # DRF's throttles count in the default cache: leave none of this test's requests there.
    cache.clear()
    yield
    cache.clear()


@pytest.mark.django_db
@pytest.mark.usefixtures("throttle_history")
def test_host_rest_framework_settings_do_not_change_the_api() -> None:
    with override_settings(REST_FRAMEWORK=HOSTILE_DRF):
        anonymous = APIClient()
        for _ in range(2):  # a host throttle would answer 429 the second time
            response = anonymous.get("/api/v1/endpoints")
            assert response.status_code == 401
            assert response["Content-Type"] == "application/json"
            assert response["WWW-Authenticate"].startswith("Bearer")
        _, token = ApiToken.issue("library")
        client = api_client(token)
        for _ in range(2):
            client.post(
                "/api/v1/endpoints",
                {"url": "https://hooks.example.com/x", "event_types": ["*"]},
                format="json",
            )
        listed = client.get("/api/v1/endpoints").json()
        assert set(listed) == {"results", "next"}
        assert len(listed["results"]) == 2
        missing = client.get("/api/v1/endpoints/00000000-0000-0000-0000-000000000000")
        assert missing.status_code == 404
        assert missing.json() == {"detail": "No Endpoint matches the given query."} or (
            set(missing.json()) == {"detail"}
        )
        for _ in range(2):
            assert anonymous.get("/api/v1/schema").status_code == 200
