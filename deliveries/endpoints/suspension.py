"""Automatic suspension: an endpoint that keeps failing is suspended (its deliveries are
held, not lost), and its contact (`owner_email`) and subscribers are told.

Only failures that are both numerous and spread over time count (`suspension_rules`), so a
one-minute outage that fails a burst of deliveries does not suspend a healthy integration.
"""

import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from deliveries import conf, metrics
from deliveries.endpoints import operational_events, suspension_rules
from deliveries.endpoints.lifecycle import endpoint_suspend
from deliveries.models import Endpoint, EndpointState
from deliveries.pipeline.emit import emit
from deliveries.signals import endpoint_suspended

logger = logging.getLogger(__name__)


def endpoint_suspend_if_failing(*, endpoint_id: UUID, row: Mapping[str, Any]) -> bool:
    """Suspend the endpoint when its consecutive failures (those after its last success)
    call for it; `row` holds its state, counters and own thresholds."""
    if not row["consecutive_failures"] or row["state"] != EndpointState.ACTIVE:
        return False
    settings = conf.health()
    threshold = row["suspend_after_failures"]
    window = row["suspend_window_seconds"]
    threshold = settings.suspend_after_failures if threshold is None else threshold
    window = settings.suspend_window_seconds if window is None else window
    if not suspension_rules.should_suspend(
        consecutive_failures=row["consecutive_failures"],
        failing_since=row["failing_since"],
        now=timezone.now(),
        threshold=threshold,
        window_seconds=window,
    ):
        return False
    since = f"{row['failing_since']:%Y-%m-%d %H:%M:%S}"
    return endpoint_suspend_automatically(
        endpoint_id=endpoint_id,
        reason=f"{row['consecutive_failures']} consecutive failed attempts since {since}",
    )


def endpoint_suspend_automatically(*, endpoint_id: UUID, reason: str) -> bool:
    """Suspend an endpoint the platform gave up on, and tell its contact and subscribers.

    In one transaction: the suspension (its pending deliveries are held) and the
    operational event `endpoint.suspended`. After commit: the `endpoint_suspended` signal
    and an email to the endpoint's contact (`owner_email`). Returns False when it was not active.
    """
    with transaction.atomic():
        if not endpoint_suspend(endpoint_id=endpoint_id, reason=reason):
            return False
        endpoint = Endpoint.objects.get(pk=endpoint_id)
        emit(
            operational_events.ENDPOINT_SUSPENDED,
            {
                "endpoint_id": str(endpoint.pk),
                "description": endpoint.description,
                "reason": endpoint.state_reason,
                "suspended_at": (endpoint.state_changed_at or timezone.now()).isoformat(),
            },
            # The endpoint's own tenant hears of it; another tenant must not.
            tenant=endpoint.tenant,
        )
        transaction.on_commit(lambda: _notify_suspension(endpoint), robust=True)
    metrics.ENDPOINTS_AUTO_SUSPENDED.inc()
    logger.warning("endpoint %s suspended: %s", endpoint_id, reason)
    return True


def _notify_suspension(endpoint: Endpoint) -> None:
    endpoint_suspended.send(sender=Endpoint, endpoint=endpoint, reason=endpoint.state_reason)
    if not endpoint.owner_email:
        return
    # Only the host: a URL's path or query may carry the endpoint's own token.
    host = urlsplit(endpoint.url).hostname or "?"
    send_mail(
        subject=f"Webhook endpoint suspended: {endpoint.description or host}",
        message=(
            f"We stopped sending webhooks to your endpoint {endpoint.pk} ({host}).\n\n"
            f"Reason: {endpoint.state_reason}\n\n"
            "Deliveries are held, not lost. Fix the endpoint, then ask an operator to "
            "resume the endpoint; held deliveries are sent then."
        ),
        from_email=None,
        recipient_list=[endpoint.owner_email],
    )
