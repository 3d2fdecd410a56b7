"""Replays: send a time range of events again to the endpoints subscribed to them.

A replay makes new deliveries (``is_replay=True``) of the original events, so endpoints see
the original ``X-Webhook-Id`` with ``X-Webhook-Replay: true``, and every one of them goes
through the normal claim, signing, rate-limit and backoff path. The deliveries are created
in batches by a task, never in the request that asked for the replay; the ``Replay`` row
holds the cursor, so a lost message or a dead worker only delays the rest (the beat task
``resume_stalled_replays`` picks it up again).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from deliveries import conf
from deliveries.models import Delivery, Endpoint, EndpointState, Event, Replay, ReplayStatus
from deliveries.pipeline import event_types, subscriptions
from deliveries.pipeline.fanout import due_at_once, new_delivery
from deliveries.pipeline.messages import RUN_REPLAY_TASK, dispatch_task
from deliveries.pipeline.wake import wake_endpoints
from webhooks_core import tenants


class ReplayInvalid(ValueError):
    """The replay's filters cannot be used as given; nothing was created."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ReplayFilters:
    """Events recorded in ``[since, until)``, optionally of some types, to some endpoints,
    of one tenant. Whatever the filters, an event only goes to its own tenant's endpoints."""

    since: datetime
    until: datetime
    event_types: Sequence[str] = ()
    endpoint_ids: Sequence[UUID] = ()
    tenant: str | None = None


@dataclass(frozen=True)
class ReplayPreview:
    events: int  # events that would be sent to at least one endpoint
    deliveries: int  # requests that would be made (event x endpoint)
    endpoints: int  # endpoints that would receive at least one
    per_endpoint: dict[str, int] = field(default_factory=dict)


def batch_size() -> int:
    return conf.get().replay_batch_size


def replay_check(filters: ReplayFilters) -> None:
    if timezone.is_naive(filters.since) or timezone.is_naive(filters.until):
        raise ReplayInvalid("since", "since and until must carry a time zone")
    if filters.since >= filters.until:
        raise ReplayInvalid("until", "must be after since")
    tenant_problem = tenants.problem(filters.tenant)
    if tenant_problem:
        raise ReplayInvalid("tenant", tenant_problem)
    for pattern in filters.event_types:
        problem = event_types.validate_filter(pattern)
        if problem:
            raise ReplayInvalid("event_types", problem)
    if filters.endpoint_ids:
        wanted = {str(pk) for pk in filters.endpoint_ids}
        candidates = Endpoint.objects.filter(pk__in=wanted)
        if filters.tenant is not None:
            # Another tenant's endpoint is as unknown as one that does not exist.
            candidates = candidates.filter(tenant=filters.tenant)
        found = {str(pk): state for pk, state in candidates.values_list("pk", "state")}
        missing = sorted(wanted - found.keys())
        if missing:
            raise ReplayInvalid("endpoint_ids", f"unknown endpoint(s): {', '.join(missing)}")
        disabled = sorted(pk for pk, state in found.items() if state == EndpointState.DISABLED)
        if disabled:
            raise ReplayInvalid("endpoint_ids", f"disabled endpoint(s): {', '.join(disabled)}")


def _type_condition(patterns: Iterable[str]) -> Q:
    patterns = list(patterns)
    if not patterns or event_types.WILDCARD in patterns:
        return Q()
    condition = Q(pk__in=[])
    for pattern in patterns:
        if pattern.endswith(".*"):
            condition |= Q(type__startswith=pattern[:-1])
        else:
            condition |= Q(type=pattern)
    return condition


def _events(filters: ReplayFilters) -> QuerySet[Event]:
    events = Event.objects.filter(
        _type_condition(filters.event_types),
        created_at__gte=filters.since,
        created_at__lt=filters.until,
    )
    if filters.tenant is not None:
        events = events.filter(tenant=filters.tenant)
    return events


def _target_endpoints(filters: ReplayFilters) -> list[Endpoint]:
    # Disabled endpoints get nothing; suspended ones get held deliveries, as in fan-out.
    endpoints = Endpoint.objects.exclude(state=EndpointState.DISABLED).only(
        "id", "state", *subscriptions.FIELDS
    )
    if filters.tenant is not None:
        endpoints = endpoints.filter(tenant=filters.tenant)
    if filters.endpoint_ids:
        endpoints = endpoints.filter(pk__in=list(filters.endpoint_ids))
    return list(endpoints)


def _subscribers_of(type_: str, tenant: str | None, endpoints: list[Endpoint]) -> list[Endpoint]:
    """By tenant and type only: the preview counts per type, so with payload filters its
    figures are upper bounds (each event is matched against the filters when its batch runs)."""
    return [
        e for e in endpoints if e.tenant == tenant and event_types.matches(type_, e.event_types)
    ]


def _subscribers_now(event: Event, endpoints: list[Endpoint]) -> list[Endpoint]:
    subscribers = subscriptions.Subscribers(event)
    return [endpoint for endpoint in endpoints if subscribers.accepts(endpoint)]


def replay_preview(*, filters: ReplayFilters) -> ReplayPreview:
    """Count what a replay would send, without writing anything (one query per type)."""
    replay_check(filters)
    endpoints = _target_endpoints(filters)
    per_type = _events(filters).values("type", "tenant").annotate(n=Count("id")).order_by()
    events = deliveries = 0
    per_endpoint: dict[str, int] = {}
    for row in per_type:
        subscribers = _subscribers_of(row["type"], row["tenant"], endpoints)
        if not subscribers:
            continue
        events += row["n"]
        deliveries += row["n"] * len(subscribers)
        for endpoint in subscribers:
            per_endpoint[str(endpoint.pk)] = per_endpoint.get(str(endpoint.pk), 0) + row["n"]
    return ReplayPreview(
        events=events,
        deliveries=deliveries,
        endpoints=len(per_endpoint),
        per_endpoint=per_endpoint,
    )


def replay_create(
    *,
    filters: ReplayFilters,
    requested_via: str,
    requested_by: Any = None,
    start_task: bool = True,
) -> tuple[Replay, ReplayPreview]:
    """Record a replay and start its batches after commit. Returns it with its preview.

    ``start_task=False`` when the caller runs the batches itself (`replay_run_inline`).
    """
    preview = replay_preview(filters=filters)
    with transaction.atomic():
        replay = Replay.objects.create(
            requested_by=requested_by,
            requested_via=requested_via[:200],
            since=filters.since,
            until=filters.until,
            event_types=list(filters.event_types),
            endpoint_ids=[str(pk) for pk in filters.endpoint_ids],
            tenant=filters.tenant,
            expected_deliveries=preview.deliveries,
        )
        if start_task:
            transaction.on_commit(lambda: _dispatch_step(replay.pk), robust=True)
    return replay, preview


def _dispatch_step(replay_id: int) -> None:
    dispatch_task(RUN_REPLAY_TASK, replay_id)


def filters_of(replay: Replay) -> ReplayFilters:
    return ReplayFilters(
        since=replay.since,
        until=replay.until,
        event_types=tuple(replay.event_types),
        endpoint_ids=tuple(UUID(pk) for pk in replay.endpoint_ids),
        tenant=replay.tenant,
    )


def replay_step(*, replay_id: int, dispatch_next: bool = True) -> bool:
    """Create the deliveries of the next batch of events. True while more remain.

    The row lock makes two workers on the same replay take turns instead of doubling a
    batch; the cursor moves in the same transaction as the deliveries it covers.
    """
    now = timezone.now()
    with transaction.atomic():
        replay = Replay.objects.select_for_update(skip_locked=True).filter(pk=replay_id).first()
        if replay is None or replay.status == ReplayStatus.DONE:
            return False
        filters = filters_of(replay)
        endpoints = _target_endpoints(filters)
        events = _events(filters).order_by("created_at", "id")
        if not any(endpoint.filter for endpoint in endpoints):
            # Only filters read the payload: without them the batch stays light.
            events = events.only("id", "type", "tenant", "created_at")
        if replay.cursor_created_at is not None:
            events = events.filter(
                Q(created_at__gt=replay.cursor_created_at)
                | Q(created_at=replay.cursor_created_at, id__gt=replay.cursor_event_id)
            )
        size = batch_size()
        batch = list(events[:size])
        subscribers = {event.pk: _subscribers_now(event, endpoints) for event in batch}
        deliveries = [
            new_delivery(
                event_id=event.pk, endpoint=endpoint, now=now, is_replay=True, replay=replay
            )
            for event in batch
            for endpoint in subscribers[event.pk]
        ]
        created = Delivery.objects.bulk_create(deliveries)
        more = len(batch) == size
        if batch:
            replay.cursor_created_at = batch[-1].created_at
            replay.cursor_event_id = batch[-1].pk
        replay.events_done += sum(1 for e in batch if subscribers[e.pk])
        replay.deliveries_created += len(created)
        replay.status = ReplayStatus.RUNNING if more else ReplayStatus.DONE
        replay.completed_at = None if more else now
        replay.save()
        # Deliveries deferred behind an open circuit wait without a wake (the sweeper's).
        woken = {d.endpoint_id for d in created if due_at_once(d)}
        transaction.on_commit(lambda: wake_endpoints(woken), robust=True)
        if more and dispatch_next:
            transaction.on_commit(lambda: _dispatch_step(replay_id), robust=True)
    return more


def replay_run_inline(*, replay_id: int) -> Replay:
    """Run every batch in this process (the management command); same steps as the task."""
    while replay_step(replay_id=replay_id, dispatch_next=False):
        pass
    return Replay.objects.get(pk=replay_id)


def replays_resume_stalled() -> int:
    """Start again the replays whose task message was lost (beat, with the sweepers)."""
    cutoff = timezone.now() - timedelta(seconds=conf.get().wake_grace_seconds)
    stalled = list(
        Replay.objects.filter(
            status__in=[ReplayStatus.PENDING, ReplayStatus.RUNNING], updated_at__lt=cutoff
        ).values_list("pk", flat=True)
    )
    for replay_id in stalled:
        # Touch the row so the next sweep gives this message time to be consumed.
        Replay.objects.filter(pk=replay_id).update(updated_at=timezone.now())
        _dispatch_step(replay_id)
    return len(stalled)
