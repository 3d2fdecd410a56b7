"""Helpers of the operator-console tests."""

import importlib
from datetime import datetime, timedelta
from typing import Any

from django.apps import apps
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from deliveries.models import (
    Event,
)

GROUPS_MIGRATION = "deliveries.migrations.0002_operator_groups"
POLLS_MIGRATION = "deliveries.migrations.0004_pollrecord_view_permission"


def ensure_groups() -> None:
    """The data migrations' own functions: transactional tests flush the groups away."""
    importlib.import_module(GROUPS_MIGRATION).create_groups(apps, None)
    importlib.import_module(POLLS_MIGRATION).grant(apps, None)


def staff_in(group: str, username: str | None = None) -> User:
    ensure_groups()
    user = User.objects.create_user(username or group, f"{group}@example.com", "pw", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def event_at(type_: str, created_at: datetime, **data: Any) -> Event:
    """An event recorded at a given time, already fanned out (no normal delivery)."""
    now = timezone.now()
    event = Event.objects.create(
        type=type_, data=data or {"n": 1}, occurred_at=created_at, fanned_out_at=now
    )
    Event.objects.filter(pk=event.pk).update(created_at=created_at)
    event.refresh_from_db()
    return event


def hours_ago(hours: float) -> datetime:
    return timezone.now() - timedelta(hours=hours)


ADMIN = "/admin/deliveries"


def act(
    client: Client, model: str, action: str, pks: list[Any], query: str = "", **extra: Any
) -> Any:
    data = {"action": action, "_selected_action": [str(pk) for pk in pks], **extra}
    return client.post(f"{ADMIN}/{model}/{query}", data, follow=True)


def endpoint_form(**overrides: str) -> dict[str, str]:
    """The add/change form as a browser posts it (the circuit inline is read-only)."""
    return {
        "mode": "push",
        "url": "https://admin-added.example.com/hook",
        "description": "",
        "owner_email": "",
        "event_types": '["invoice.*"]',
        "custom_headers": "{}",
        "secret_headers": "",
        "version_pins": "{}",
        "max_attempts": "12",
        "backoff_base_seconds": "10",
        "backoff_max_seconds": "900",
        "retry_window_seconds": "86400",
        "connect_timeout_seconds": "3",
        "read_timeout_seconds": "10",
        "circuit_transitions-TOTAL_FORMS": "0",
        "circuit_transitions-INITIAL_FORMS": "0",
        "circuit_transitions-MIN_NUM_FORMS": "0",
        "circuit_transitions-MAX_NUM_FORMS": "0",
        **overrides,
    }
