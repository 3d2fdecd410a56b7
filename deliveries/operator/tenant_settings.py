"""What a tenant sets for itself. Today: a shorter retention of its events and attempts."""

from dataclasses import dataclass

from django.db import transaction

from deliveries import conf
from deliveries.models import TenantSettings
from deliveries.operator.audit import TENANT_SETTINGS_CHANGED, audit_record
from webhooks_core import tenants


class TenantSettingsInvalid(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Retention:
    """Days a tenant's events and attempts are kept, and the global bounds."""

    retention_days: int | None  # the tenant's own setting; None: the global ones
    event_retention_days: int
    attempt_retention_days: int


def tenant_retention(*, tenant: str) -> Retention:
    settings = conf.get()
    own = (
        TenantSettings.objects.filter(tenant=tenant)
        .values_list("retention_days", flat=True)
        .first()
    )
    events, attempts = settings.event_retention_days, settings.attempt_retention_days
    if own is not None:
        events, attempts = min(events, own), min(attempts, own)
    return Retention(
        retention_days=own, event_retention_days=events, attempt_retention_days=attempts
    )


def retention_problem(retention_days: object) -> str | None:
    """Why ``retention_days`` cannot be a tenant's retention, or None when it can."""
    longest = conf.get().event_retention_days
    if retention_days is None:
        return None
    if (
        isinstance(retention_days, bool)
        or not isinstance(retention_days, int)
        or not 1 <= retention_days <= longest
    ):
        return (
            f"must be 1 to {longest} days (WEBHOOKS_EVENT_RETENTION_DAYS: a tenant may keep "
            "its data for fewer days, not more), or null for the global setting"
        )
    return None


def tenant_settings_set(
    *, tenant: str, retention_days: int | None, actor: str, api_token_id: int | None = None
) -> Retention:
    """Set ``tenant``'s retention: 1 to the global ``WEBHOOKS_EVENT_RETENTION_DAYS`` days
    (shorter only), or None for the global settings. Audit-logged."""
    problem = tenants.problem(tenant)
    if tenant is None or problem:
        raise TenantSettingsInvalid("tenant", problem or "is required")
    days_problem = retention_problem(retention_days)
    if days_problem:
        raise TenantSettingsInvalid("retention_days", days_problem)
    with transaction.atomic():
        TenantSettings.objects.update_or_create(
            tenant=tenant, defaults={"retention_days": retention_days}
        )
        audit_record(
            action=TENANT_SETTINGS_CHANGED,
            actor=actor,
            tenant=tenant,
            api_token_id=api_token_id,
            target=f"retention_days={retention_days}",
        )
    return tenant_retention(tenant=tenant)
