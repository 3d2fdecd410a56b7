"""The sweeper: the database, not the broker, decides what still has to happen.

Redis may lose every message and a worker may die mid-request. Every few seconds (Celery
beat) the sweeper fans out events that never were, and wakes every endpoint that has due
work (a due row, or a row whose sender's lease ran out) but no live owner and no recent
wake: a lost message or a dead owner costs one sweep, never a delivery. Its cost grows
with the active endpoints, idle ones included (a few index lookups each: a due row, a
row whose lease ran out, a held row), not with their rows: a saturated endpoint's backlog delays no
other endpoint's recovery. A sweep wakes at most
`WEBHOOKS_SWEEP_BATCH_SIZE` endpoints of each kind, in no fixed order; the others wait
for a later sweep. Rows left waiting on an endpoint that was disabled or suspended (its
owner died before it settled them) are cancelled or held, and rows held on an endpoint
that is active again are released.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Exists, OuterRef, Q
from django.db.models.functions import Now
from django.utils import timezone

from deliveries import conf
from deliveries.endpoints.validation import not_ready as validation_not_ready
from deliveries.models import Delivery, DeliveryStatus, Endpoint, EndpointState, Event
from deliveries.pipeline.messages import dispatch_fan_outs
from deliveries.pipeline.owner import settle_inactive_endpoints
from deliveries.pipeline.wake import wake_endpoints
from webhooks_core import conf as core_conf


@dataclass
class SweepResult:
    events_fanned_out: int = 0
    # Endpoints with due work and nobody working them, woken (their messages dispatched).
    deliveries_due: int = 0
    # Of those, endpoints whose rows' sender died (their leases ran out).
    leases_expired: int = 0
    endpoints_settled: int = 0
    # Active endpoints whose held rows were released (a resume raced their holding).
    held_released: int = 0


def sweep() -> SweepResult:
    result = SweepResult()
    result.events_fanned_out = _fan_out_stuck_events()
    grace = conf.get().wake_grace_seconds
    due, expired = _endpoints_with_unowned_work()
    dispatched = wake_endpoints(due + expired, stale_after=grace) if due or expired else 0
    result.deliveries_due = dispatched
    result.leases_expired = len(expired)
    result.endpoints_settled = _settle_inactive()
    result.held_released = _release_held_of_active()
    return result


def _fan_out_stuck_events() -> int:
    settings = conf.get()
    cutoff = timezone.now() - timedelta(seconds=settings.fanout_grace_seconds)
    event_ids = list(
        Event.objects.filter(fanned_out_at__isnull=True, created_at__lt=cutoff)
        .order_by("created_at")
        .values_list("id", flat=True)[: core_conf.scheduling().sweep_batch_size]
    )
    if event_ids:
        dispatch_fan_outs(event_ids)
    return len(event_ids)


def _unowned() -> Q:
    """Active endpoints without a live owner, whose claims are not on hold."""
    live = Q(owner__token__isnull=False, owner__expires_at__gte=Now())
    # An endpoint whose target has not consented waits for its handshake, not a wake.
    return (
        Q(state=EndpointState.ACTIVE)
        & ~live
        & ~Q(owner__not_before__gt=Now())
        & ~validation_not_ready()
    )


def _endpoints_with_unowned_work() -> tuple[list[str], list[str]]:
    """(endpoints with a due pending row, endpoints with a row whose lease ran out)."""
    limit = core_conf.scheduling().sweep_batch_size
    rows = Delivery.objects.filter(endpoint_id=OuterRef("pk"))
    pending_due = rows.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=Now())
    lease_ran_out = rows.filter(status=DeliveryStatus.SENDING, lease_expires_at__lt=Now())
    candidates = Endpoint.objects.filter(_unowned())
    due = list(
        candidates.filter(Exists(pending_due)).values_list("pk", flat=True).order_by()[:limit]
    )
    expired = list(
        candidates.filter(Exists(lease_ran_out))
        .exclude(pk__in=due)
        .values_list("pk", flat=True)
        .order_by()[:limit]
    )
    return [str(pk) for pk in due], [str(pk) for pk in expired]


def _settle_inactive() -> int:
    waiting = Delivery.objects.filter(endpoint_id=OuterRef("pk"))
    disabled = Q(state=EndpointState.DISABLED) & Exists(
        waiting.filter(
            status__in=[DeliveryStatus.PENDING, DeliveryStatus.HELD, DeliveryStatus.SENDING]
        )
    )
    suspended = Q(state=EndpointState.SUSPENDED) & Exists(
        waiting.filter(status__in=[DeliveryStatus.PENDING, DeliveryStatus.SENDING])
    )
    live = Q(owner__token__isnull=False, owner__expires_at__gte=Now())
    endpoints = list(
        Endpoint.objects.filter(disabled | suspended)
        .exclude(live)
        .values_list("pk", flat=True)[: core_conf.scheduling().sweep_batch_size]
    )
    settle_inactive_endpoints(endpoints)
    return len(endpoints)


def _release_held_of_active() -> int:
    """Rows held while their endpoint is active: pending again, due now, and woken.

    Only a suspension holds rows, and its resume releases them; a row held by a fan-out
    or a settling that read the endpoint just before a resume committed would otherwise
    stay held for ever. A net, as the rest of the sweep."""
    held = Delivery.objects.filter(endpoint_id=OuterRef("pk"), status=DeliveryStatus.HELD)
    endpoints = list(
        Endpoint.objects.filter(state=EndpointState.ACTIVE)
        .filter(Exists(held))
        .values_list("pk", flat=True)[: core_conf.scheduling().sweep_batch_size]
    )
    if not endpoints:
        return 0
    Delivery.objects.filter(
        endpoint_id__in=endpoints,
        endpoint__state=EndpointState.ACTIVE,
        status=DeliveryStatus.HELD,
    ).update(status=DeliveryStatus.PENDING, next_attempt_at=Now(), updated_at=timezone.now())
    wake_endpoints(endpoints)
    return len(endpoints)
