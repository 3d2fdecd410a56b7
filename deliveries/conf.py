"""The sending side's settings, with their defaults, in one place (see the README table)."""

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class DeliverySettings:
    max_countdown_seconds: float
    lease_seconds: float
    fanout_grace_seconds: float
    requeue_grace_seconds: float
    sweep_batch_size: int
    response_body_limit: int = 2048
    require_declared_types: bool = True
    event_type_modules: tuple[str, ...] = ()


def get() -> DeliverySettings:
    return DeliverySettings(
        max_countdown_seconds=getattr(settings, "WEBHOOKS_MAX_COUNTDOWN_SECONDS", 60.0),
        lease_seconds=getattr(settings, "WEBHOOKS_LEASE_SECONDS", 120.0),
        fanout_grace_seconds=getattr(settings, "WEBHOOKS_FANOUT_GRACE_SECONDS", 30.0),
        requeue_grace_seconds=getattr(settings, "WEBHOOKS_REQUEUE_GRACE_SECONDS", 120.0),
        sweep_batch_size=getattr(settings, "WEBHOOKS_SWEEP_BATCH_SIZE", 500),
        require_declared_types=getattr(settings, "WEBHOOKS_REQUIRE_DECLARED_TYPES", True),
        event_type_modules=tuple(getattr(settings, "WEBHOOKS_EVENT_TYPE_MODULES", ())),
    )
