"""Helpers of the operator-console tests."""

import importlib
from datetime import datetime, timedelta
from typing import Any

from django.apps import apps
from django.contrib.auth.models import Group, User
from django.utils import timezone

from deliveries import services
from deliveries.models import Endpoint, Event

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


def endpoint(url: str = "https://receiver.example.com/hook", **fields: Any) -> Endpoint:
    options: dict[str, Any] = {"event_types": ["*"], **fields}
    created, _ = services.endpoint_create(url=url, **options)
    return created


def hours_ago(hours: float) -> datetime:
    return timezone.now() - timedelta(hours=hours)
