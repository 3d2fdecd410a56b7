"""Endpoint life cycle: create, update, rotate secrets, suspend."""

from datetime import timedelta
from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from .. import conf, signing, ssrf
from ..models import DeliveryStatus, Endpoint, EndpointSecret, EndpointState
from . import endpoint_options
from .versions import default_pins

DEFAULT_ROTATION_GRACE_SECONDS = 24 * 3600


@transaction.atomic
def endpoint_create(*, url: str, event_types: list[str], **fields: Any) -> tuple[Endpoint, str]:
    """Create an endpoint with its first signing secret; the secret is returned once.

    Raises `ssrf.UnsafeURL` for a URL the SSRF guard refuses.
    """
    endpoint_check_url(url=url)
    fields["version_pins"] = default_pins(event_types, fields.get("version_pins"))
    endpoint_options.endpoint_check_options(fields)
    if "filter" in fields:
        fields["filter"] = endpoint_options.normalised_filter(fields["filter"])
    endpoint = Endpoint.objects.create(url=url, event_types=event_types, **fields)
    secret = _add_secret(endpoint)
    endpoint_options.endpoint_ensure_signing_key(endpoint=endpoint)
    return endpoint, secret


def endpoint_check_url(*, url: str) -> None:
    """Refuse a URL that may not receive webhooks (scheme, private or internal address)."""
    problem = ssrf.url_refusal(url, conf.address_policy())
    if problem:
        raise ssrf.UnsafeURL(problem)


def _add_secret(endpoint: Endpoint) -> str:
    plain = signing.generate_secret()
    secret = EndpointSecret(endpoint=endpoint)
    secret.value = plain
    secret.save()
    return plain


@transaction.atomic
def endpoint_rotate_secret(
    *, endpoint: Endpoint, grace_seconds: int = DEFAULT_ROTATION_GRACE_SECONDS
) -> tuple[str, EndpointSecret]:
    """Add a new secret; the current ones keep signing until the grace period ends.

    Returns the new secret (shown once) and its row. With ``grace_seconds=0`` the old
    secrets stop signing at once.
    """
    now = timezone.now()
    expires_at = now + timedelta(seconds=grace_seconds)
    for old in endpoint.secrets.unexpired(now).select_for_update():
        if old.expires_at is None or old.expires_at > expires_at:
            old.expires_at = expires_at
            old.save(update_fields=["expires_at"])
    plain = _add_secret(endpoint)
    return plain, endpoint.secrets.order_by("-created_at", "-pk").first()  # type: ignore[return-value]


def endpoint_suspend(*, endpoint_id: UUID, reason: str) -> bool:
    """Stop sending to an endpoint; its pending deliveries are held without spending attempts.

    Returns False when the endpoint was not active.
    """
    now = timezone.now()
    with transaction.atomic():
        changed = Endpoint.objects.filter(pk=endpoint_id, state=EndpointState.ACTIVE).update(
            state=EndpointState.SUSPENDED, state_reason=reason[:500], state_changed_at=now
        )
        if changed:
            from ..models import Delivery

            Delivery.objects.filter(endpoint_id=endpoint_id, status=DeliveryStatus.PENDING).update(
                status=DeliveryStatus.HELD, updated_at=now
            )
    return bool(changed)


def endpoint_resume(*, endpoint_id: UUID, deliver_backlog: bool = True) -> int:
    """Make a suspended endpoint active again; its held deliveries are sent or cancelled.

    Returns how many held deliveries were released (or cancelled).
    """
    from ..models import Delivery
    from .enqueue import enqueue_deliveries

    now = timezone.now()
    with transaction.atomic():
        Endpoint.objects.filter(pk=endpoint_id).exclude(state=EndpointState.ACTIVE).update(
            state=EndpointState.ACTIVE,
            state_reason="",
            state_changed_at=now,
            consecutive_failures=0,
            failing_since=None,
        )
        held = Delivery.objects.filter(endpoint_id=endpoint_id, status=DeliveryStatus.HELD)
        if not deliver_backlog:
            return held.update(status=DeliveryStatus.CANCELLED, completed_at=now, updated_at=now)
        ids = list(held.values_list("id", flat=True))
        held.update(
            status=DeliveryStatus.PENDING, next_attempt_at=now, enqueued_at=now, updated_at=now
        )
        transaction.on_commit(lambda: enqueue_deliveries(ids), robust=True)
    return len(ids)


def endpoint_set_state(*, endpoint_id: UUID, state: str, reason: str = "") -> None:
    """Move an endpoint to a state with the side effects that state change implies."""
    if state == EndpointState.ACTIVE:
        endpoint_resume(endpoint_id=endpoint_id)
    elif state == EndpointState.SUSPENDED:
        endpoint_suspend(endpoint_id=endpoint_id, reason=reason or "suspended by an operator")
    elif state == EndpointState.DISABLED:
        from ..models import Delivery

        now = timezone.now()
        with transaction.atomic():
            Endpoint.objects.filter(pk=endpoint_id).update(
                state=EndpointState.DISABLED,
                state_reason=reason or "disabled by an operator",
                state_changed_at=now,
            )
            # A disabled endpoint gets nothing more: what waited for it is cancelled.
            Delivery.objects.filter(
                endpoint_id=endpoint_id,
                status__in=[DeliveryStatus.PENDING, DeliveryStatus.HELD],
            ).update(status=DeliveryStatus.CANCELLED, completed_at=now, updated_at=now)
    else:
        raise ValueError(f"unknown endpoint state {state!r}")
