"""The receiving side's settings, with their defaults, in one place (see the README table),
and the system checks that refuse inconsistent ones."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

#: Providers retry for days (Stripe: up to 3); dedupe history must outlive that.
MIN_SAFE_INBOX_RETENTION_DAYS = 7


@dataclass(frozen=True)
class ReceiverSettings:
    max_attempts: int
    backoff_base_seconds: float
    backoff_max_seconds: float
    lease_seconds: float
    requeue_grace_seconds: float
    body_retention_days: int
    inbox_retention_days: int
    handler_modules: tuple[str, ...]
    max_countdown_seconds: float
    sweep_batch_size: int
    enqueue_batch_size: int


def get() -> ReceiverSettings:
    return ReceiverSettings(
        max_attempts=getattr(settings, "RECEIVERS_MAX_ATTEMPTS", 10),
        backoff_base_seconds=getattr(settings, "RECEIVERS_BACKOFF_BASE_SECONDS", 10.0),
        backoff_max_seconds=getattr(settings, "RECEIVERS_BACKOFF_MAX_SECONDS", 3600.0),
        lease_seconds=getattr(settings, "RECEIVERS_LEASE_SECONDS", 300.0),
        requeue_grace_seconds=getattr(settings, "RECEIVERS_REQUEUE_GRACE_SECONDS", 60.0),
        body_retention_days=getattr(settings, "RECEIVERS_BODY_RETENTION_DAYS", 30),
        inbox_retention_days=getattr(settings, "RECEIVERS_INBOX_RETENTION_DAYS", 90),
        handler_modules=tuple(
            getattr(settings, "RECEIVERS_HANDLER_MODULES", ["receivers.example.handlers"])
        ),
        # Shared with the sending side: bounded by the broker's visibility timeout.
        max_countdown_seconds=getattr(settings, "WEBHOOKS_MAX_COUNTDOWN_SECONDS", 60.0),
        sweep_batch_size=getattr(settings, "WEBHOOKS_SWEEP_BATCH_SIZE", 500),
        enqueue_batch_size=getattr(settings, "RECEIVERS_ENQUEUE_BATCH_SIZE", 20),
    )


@register(Tags.compatibility)
def check_receiver_settings(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[CheckMessage]:
    conf = get()
    problems: list[CheckMessage] = []
    if conf.max_attempts < 1:
        problems.append(Error("RECEIVERS_MAX_ATTEMPTS must be at least 1.", id="receivers.E001"))
    if conf.enqueue_batch_size < 1:
        problems.append(
            Error("RECEIVERS_ENQUEUE_BATCH_SIZE must be at least 1.", id="receivers.E003")
        )
    if conf.backoff_max_seconds < conf.backoff_base_seconds:
        problems.append(
            Error(
                "RECEIVERS_BACKOFF_MAX_SECONDS is smaller than RECEIVERS_BACKOFF_BASE_SECONDS.",
                id="receivers.E002",
            )
        )
    if conf.inbox_retention_days < MIN_SAFE_INBOX_RETENTION_DAYS:
        problems.append(
            Warning(
                f"RECEIVERS_INBOX_RETENTION_DAYS is below {MIN_SAFE_INBOX_RETENTION_DAYS}: "
                "a provider's late redelivery could find no inbox row and be processed again.",
                id="receivers.W001",
            )
        )
    if conf.body_retention_days > conf.inbox_retention_days:
        problems.append(
            Warning(
                "RECEIVERS_BODY_RETENTION_DAYS exceeds RECEIVERS_INBOX_RETENTION_DAYS; "
                "bodies go with their rows.",
                id="receivers.W002",
            )
        )
    return problems
