"""Erasing a tenant: every row and file of the sending side that belongs to it, in batches.

``tenant_erasure_start`` records the request (a ``TenantErasure`` row) and disables the
tenant's endpoints, so nothing more is sent to them; the work is done by
``tenant_erasure_run`` in short transactions of at most ``batch_size`` rows each, the
erasure's row locked for each one (``SKIP LOCKED``: two runs never work on one erasure).
A run that crashes or stops at its time budget loses nothing: the periodic task
``deliveries.erasure.resume`` (beat) resumes every erasure still running.

What goes, in this order (children before parents, so no cascade loads rows): attempts,
deliveries, events with their offloaded payloads (deleted once the batch commits),
replays, portal links, endpoints with their secrets, signing keys and circuit history, the
API tokens limited to the tenant, its settings. A delivery being sent right now is left
until its lease ends (its attempt is being recorded); the next run takes it. The tenant's
id is then cleared from the erasure row and from the audit log; what remains is an audit
entry with who asked, when, and how many rows of each kind went. No personal data.

Besides the rows: the admin's log entries naming the endpoints, tokens and settings keep
who did what but no longer how the row read; audit entries keep a token's number, not its
name; the OAuth2 tokens kept in Redis for the endpoints are dropped, and the endpoints'
ids leave ``/metrics`` (`gauges.live_endpoints`). docs/operations/privacy.md says what
remains outside the process (a Prometheus server's history).
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Now
from django.utils import timezone

from deliveries import conf, metrics
from deliveries.destinations.http_client import oauth2
from deliveries.models import (
    ApiToken,
    Attempt,
    CircuitTransition,
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointSecret,
    EndpointSigningKey,
    EndpointState,
    ErasureStatus,
    Event,
    PortalLink,
    Replay,
    TenantErasure,
    TenantSettings,
)
from deliveries.operator.audit import TENANT_ERASED, TENANT_ERASURE_STARTED, audit_record
from deliveries.pipeline import payloads
from deliveries.pipeline.messages import RUN_ERASURE_TASK, dispatch_task
from webhooks_core import tenants
from webhooks_core.models import AuditEntry

DEFAULT_BATCH_SIZE = 500
DEFAULT_TIME_BUDGET_SECONDS = 20.0
ERASED_REPR = "(erased)"


class ErasureInvalid(ValueError):
    """The erasure cannot be started as asked; nothing was written."""


@dataclass(frozen=True)
class Actor:
    """Who asked: shown in the audit log (an API token, an admin user's id, a command)."""

    label: str
    api_token_id: int | None = None
    user_id: int | None = None


def tenant_erasure_start(*, tenant: str, actor: Actor) -> TenantErasure:
    """Start erasing ``tenant`` (the running erasure, if one is already under way).

    The run is dispatched once this commits; beat resumes it if that message is lost.
    """
    problem = tenants.problem(tenant)
    if tenant is None or problem:
        raise ErasureInvalid(f"tenant {problem or 'is required'}")
    running = TenantErasure.objects.filter(tenant=tenant, status=ErasureStatus.RUNNING).first()
    if running is not None:
        return running
    now = timezone.now()
    try:
        with transaction.atomic():
            erasure = TenantErasure.objects.create(tenant=tenant, requested_via=actor.label)
            # Nothing more is sent to the tenant from now on.
            Endpoint.objects.filter(tenant=tenant).exclude(state=EndpointState.DISABLED).update(
                state=EndpointState.DISABLED,
                state_reason="tenant being erased",
                state_changed_at=now,
            )
            Delivery.objects.filter(
                endpoint__tenant=tenant,
                status__in=[DeliveryStatus.PENDING, DeliveryStatus.HELD],
            ).update(status=DeliveryStatus.CANCELLED, completed_at=now, updated_at=now)
            audit_record(
                action=TENANT_ERASURE_STARTED,
                actor=actor.label,
                api_token_id=actor.api_token_id,
                user_id=actor.user_id,
                target=f"erasure #{erasure.pk}",
            )
            transaction.on_commit(lambda: dispatch_task(RUN_ERASURE_TASK, erasure.pk), robust=True)
    except IntegrityError:
        # Another request started it between the look-up and the insert.
        return TenantErasure.objects.get(tenant=tenant, status=ErasureStatus.RUNNING)
    return erasure


# --- the batches ------------------------------------------------------------------------


def _leased() -> Q:
    """A delivery some owner is sending right now: left alone until its lease ends (by
    the database's clock, as every lease is judged: `lease_rows`, `claims`)."""
    return Q(status=DeliveryStatus.SENDING, lease_expires_at__gt=Now())


def _attempts(tenant: str) -> QuerySet[Attempt]:
    mine = Q(delivery__endpoint__tenant=tenant) | Q(delivery__event__tenant=tenant)
    busy = Delivery.objects.filter(pk=OuterRef("delivery_id")).filter(_leased())
    return Attempt.objects.filter(mine).exclude(Exists(busy)).order_by("pk")


def _deliveries(tenant: str) -> QuerySet[Delivery]:
    mine = Q(endpoint__tenant=tenant) | Q(event__tenant=tenant)
    left = Attempt.objects.filter(delivery_id=OuterRef("pk"))
    return Delivery.objects.filter(mine).exclude(_leased()).exclude(Exists(left)).order_by("pk")


def _events(tenant: str) -> QuerySet[Event]:
    left = Delivery.objects.filter(event_id=OuterRef("pk"))
    return Event.objects.filter(tenant=tenant).exclude(Exists(left)).order_by("pk")


def _endpoints(tenant: str) -> QuerySet[Endpoint]:
    left = Delivery.objects.filter(endpoint_id=OuterRef("pk"))
    return Endpoint.objects.filter(tenant=tenant).exclude(Exists(left)).order_by("pk")


def _delete_events(pks: list[Any], counts: dict[str, int]) -> None:
    stored = list(
        Event.objects.filter(pk__in=pks).exclude(data_ref="").values_list("data_ref", flat=True)
    )
    counts["events"] += Event.objects.filter(pk__in=pks).delete()[1].get(Event._meta.label, 0)
    counts["payloads"] += len(stored)
    # Files go once their rows are gone for good, never before.
    transaction.on_commit(lambda: payloads.discard(stored), robust=True)


def _delete_endpoints(pks: list[Any], counts: dict[str, int]) -> None:
    ids = [str(pk) for pk in pks]
    with_auth = [
        str(pk)
        for pk in Endpoint.objects.filter(pk__in=pks, auth__isnull=False).values_list(
            "pk", flat=True
        )
    ]
    counts["secrets"] += EndpointSecret.objects.filter(endpoint_id__in=pks).delete()[0]
    counts["secrets"] += EndpointSigningKey.objects.filter(endpoint_id__in=pks).delete()[0]
    CircuitTransition.objects.filter(endpoint_id__in=pks).delete()
    _forget_in_admin_log(Endpoint, pks)
    counts["endpoints"] += (
        Endpoint.objects.filter(pk__in=pks).delete()[1].get(Endpoint._meta.label, 0)
    )

    def forget() -> None:
        # What we keep of them outside the database: OAuth2 tokens in Redis (until they
        # expire), counters labelled with their ids in this process.
        oauth2.forget_tokens(scope_keys=with_auth, redis_url=conf.counters().redis_url)
        metrics.forget_endpoints(ids)

    transaction.on_commit(forget, robust=True)


def _delete_api_tokens(pks: list[Any], counts: dict[str, int]) -> None:
    # The audit log keeps which token did what, not the token's name (the tenant chose it).
    for pk in pks:
        AuditEntry.objects.filter(api_token_id=pk).update(actor=f"api token #{pk} {ERASED_REPR}")
    _forget_in_admin_log(ApiToken, pks)
    counts["api_tokens"] += (
        ApiToken.objects.filter(pk__in=pks).delete()[1].get(ApiToken._meta.label, 0)
    )


def _forget_in_admin_log(model: type[Any], pks: list[Any]) -> None:
    """The admin's history of these rows keeps who did what, not how the row read (an
    endpoint's URL or owner e-mail)."""
    content_type = ContentType.objects.get_for_model(model)
    LogEntry.objects.filter(
        content_type=content_type, object_id__in=[str(pk) for pk in pks]
    ).update(object_repr=ERASED_REPR, change_message="")


def _simple(
    model: type[Any], key: str, *, named: bool = False
) -> Callable[[list[Any], dict[str, int]], None]:
    """``named``: the rows' text names the tenant, so their admin log entries forget it."""

    def delete(pks: list[Any], counts: dict[str, int]) -> None:
        if named:
            _forget_in_admin_log(model, pks)
        counts[key] += model.objects.filter(pk__in=pks).delete()[1].get(model._meta.label, 0)

    return delete


KINDS = (
    "attempts",
    "deliveries",
    "events",
    "payloads",
    "replays",
    "portal_links",
    "endpoints",
    "secrets",
    "api_tokens",
)


def _batches(tenant: str) -> list[tuple[QuerySet[Any], Callable[..., None]]]:
    return [
        (_attempts(tenant), _simple(Attempt, "attempts")),
        (_deliveries(tenant), _simple(Delivery, "deliveries")),
        (_events(tenant), _delete_events),
        (Replay.objects.filter(tenant=tenant).order_by("pk"), _simple(Replay, "replays")),
        (
            PortalLink.objects.filter(tenant=tenant).order_by("pk"),
            _simple(PortalLink, "portal_links", named=True),
        ),
        (_endpoints(tenant), _delete_endpoints),
        (ApiToken.objects.filter(tenant=tenant).order_by("pk"), _delete_api_tokens),
    ]


def tenant_erasure_step(*, erasure_id: int, batch_size: int = DEFAULT_BATCH_SIZE) -> str:
    """One batch, in one transaction: ``"more"`` (call again), ``"waiting"`` (only rows
    being sent are left: a later run takes them), ``"done"`` or ``"busy"`` (another run
    holds this erasure, or it is not running)."""
    with transaction.atomic():
        erasure = (
            TenantErasure.objects.select_for_update(skip_locked=True)
            .filter(pk=erasure_id, status=ErasureStatus.RUNNING)
            .first()
        )
        if erasure is None or erasure.tenant is None:
            return "busy"
        tenant = erasure.tenant
        counts = {kind: int(erasure.counts.get(kind, 0)) for kind in KINDS}
        for queryset, delete in _batches(tenant):
            pks = list(queryset.values_list("pk", flat=True)[:batch_size])
            if pks:
                delete(pks, counts)
                erasure.counts = counts
                erasure.save(update_fields=["counts", "updated_at"])
                return "more"
        if Delivery.objects.filter(Q(endpoint__tenant=tenant) | Q(event__tenant=tenant)).exists():
            return "waiting"
        _finish(erasure, counts)
        return "done"


def _finish(erasure: TenantErasure, counts: dict[str, int]) -> None:
    tenant = erasure.tenant
    settings_rows = TenantSettings.objects.filter(tenant=tenant)
    _forget_in_admin_log(TenantSettings, list(settings_rows.values_list("pk", flat=True)))
    settings_rows.delete()
    # The audit log keeps what happened, not to whom.
    AuditEntry.objects.filter(tenant=tenant).update(tenant=None)
    erasure.tenant = None
    erasure.status = ErasureStatus.DONE
    erasure.completed_at = timezone.now()
    erasure.counts = counts
    erasure.save(update_fields=["tenant", "status", "completed_at", "counts", "updated_at"])
    started = AuditEntry.objects.filter(
        action=TENANT_ERASURE_STARTED, target=f"erasure #{erasure.pk}"
    ).first()
    audit_record(
        action=TENANT_ERASED,
        actor=erasure.requested_via,
        api_token_id=started.api_token_id if started else None,
        user_id=started.user_id if started else None,
        target=f"erasure #{erasure.pk}",
        counts={**counts, "total": sum(counts.values()) - counts["payloads"]},
    )


def tenant_erasure_run(
    *,
    erasure_id: int,
    batch_size: int = DEFAULT_BATCH_SIZE,
    time_budget_seconds: float = DEFAULT_TIME_BUDGET_SECONDS,
) -> str:
    """Batches until the erasure is done, waits for rows in flight, or the time budget
    is spent (then ``"more"``: beat's next resume goes on)."""
    deadline = time.monotonic() + time_budget_seconds
    while True:
        outcome = tenant_erasure_step(erasure_id=erasure_id, batch_size=batch_size)
        if outcome != "more" or time.monotonic() > deadline:
            return outcome


def tenant_erasures_resume(*, batch_size: int = DEFAULT_BATCH_SIZE) -> int:
    """Run every erasure still running (a crashed or lost run included); how many ran."""
    ids = list(
        TenantErasure.objects.filter(status=ErasureStatus.RUNNING).values_list("pk", flat=True)
    )
    for erasure_id in ids:
        tenant_erasure_run(erasure_id=erasure_id, batch_size=batch_size)
    return len(ids)
