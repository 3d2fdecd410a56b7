"""Emitting events: the product's one entry point to the sending side."""

import contextlib
import json
import re
import uuid
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from deliveries import catalogue, conf
from deliveries.models import Event
from deliveries.pipeline import payloads
from deliveries.pipeline.fanout import event_insert
from deliveries.signals import announce_event_emitted
from webhooks_core import tenants, tracing
from webhooks_core.jsonchecks.text import unstorable_text


class EventRefused(ValueError):
    """The event cannot be emitted as given; nothing was written."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


MAX_TYPE_LENGTH = 200
# \Z, not $: "$" also matches before a trailing newline, which would let "a.b\n" through.
EVENT_TYPE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.:-]*\Z")


def _validate(
    type: str,
    data: Any,
    version: int | None,
    occurred_at: datetime | None,
    idempotency_key: str | None,
    ordering_key: str | None = None,
) -> int:
    """Check the arguments; returns the version to store."""
    if not isinstance(type, str) or not type.strip():
        raise EventRefused("type", "must be a non-empty string")
    if len(type) > MAX_TYPE_LENGTH or not EVENT_TYPE.match(type):
        raise EventRefused(
            "type",
            f"must be at most {MAX_TYPE_LENGTH} letters, digits and . _ : - (e.g. invoice.paid)",
        )
    if version is not None and (
        isinstance(version, bool) or not isinstance(version, int) or version < 1
    ):
        raise EventRefused("version", "must be a positive integer")
    if occurred_at is not None and (
        not isinstance(occurred_at, datetime) or timezone.is_naive(occurred_at)
    ):
        raise EventRefused("occurred_at", "must be a timezone-aware datetime")
    if idempotency_key is not None and (
        not isinstance(idempotency_key, str)
        or not 0 < len(idempotency_key) <= 255
        or not idempotency_key.isprintable()
    ):
        raise EventRefused("idempotency_key", "must be 1 to 255 printable characters")
    if ordering_key is not None and (
        not isinstance(ordering_key, str)
        or not 0 < len(ordering_key) <= 255
        or not ordering_key.isprintable()
    ):
        raise EventRefused("ordering_key", "must be 1 to 255 printable characters")
    try:
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise EventRefused("data", f"is not JSON-serialisable ({exc})") from None
    problem = unstorable_text(data)
    if problem:
        raise EventRefused("data", problem)
    return _check_against_catalogue(type, data, version)


def _check_against_catalogue(type: str, data: Any, version: int | None) -> int:
    """Declared types are stored in their newest version and must match its schema."""
    event_type = catalogue.get(type)
    if event_type is None:
        if conf.get().require_declared_types:
            raise EventRefused(
                "type", f"{type!r} is not a declared event type (see the event-type catalogue)"
            )
        return version or 1
    newest = event_type.newest.number
    if version is not None and version != newest:
        # Older versions are built from the newest for the endpoints pinned to them.
        raise EventRefused(
            "version", f"{type} is emitted in its newest version, {newest}, not {version}"
        )
    problem = event_type.problem(data, newest)
    if problem:
        raise EventRefused(*problem)
    return newest


def emit(
    type: str,
    data: Any,
    *,
    version: int | None = None,
    occurred_at: datetime | None = None,
    idempotency_key: str | None = None,
    ordering_key: str | None = None,
    traceparent: str | None = None,
    tenant: str | None = None,
) -> Event:
    """Record an event and deliver it to every subscribed endpoint.

    Call it inside your own ``transaction.atomic()`` next to the change it describes: the
    event is written in that transaction and fanned out only once it commits, so a rolled
    back transaction emits nothing and a committed one is never lost. Outside a
    transaction it commits at once.

    With ``idempotency_key``, a second call with the same key for the same tenant returns
    the first event and writes nothing (keys are unique per tenant; the events without a
    tenant are a scope of their own). Invalid arguments raise ``EventRefused``
    and write nothing: an undeclared type, data that fails the type's schema
    (``.field`` names the spot, e.g. ``data.amount``), a version other than the newest.
    Events with the same ``ordering_key`` reach endpoints that ask for ordered delivery
    one at a time, in order.

    ``traceparent`` (W3C trace context) defaults to the current OpenTelemetry span's, if
    any; it is sent with every attempt so a trace joins the request and its deliveries.

    With ``tenant`` (1-100 characters of ``[A-Za-z0-9_.:-]``) the event goes to that
    tenant's endpoints only; without one, to the endpoints without a tenant.

    With a tracer provider configured, the event carries its `webhooks emit` span's.
    """
    tenant_problem = tenants.problem(tenant)
    if tenant_problem:
        raise EventRefused("tenant", tenant_problem)
    if traceparent is not None and not tracing.is_valid(traceparent):
        raise EventRefused("traceparent", "must be a W3C traceparent (00-<trace>-<span>-<flags>)")
    attributes = {"webhooks.event.type": type if isinstance(type, str) else None}
    with tracing.span(
        "webhooks emit", kind="PRODUCER", traceparent=traceparent, attributes=attributes
    ) as span:
        event = _emit(
            type,
            data,
            version=version,
            occurred_at=occurred_at,
            idempotency_key=idempotency_key,
            ordering_key=ordering_key,
            traceparent=tracing.traceparent_of(span) or traceparent,
            tenant=tenant,
        )
        tracing.set_attributes(span, {"webhooks.event.id": str(event.pk)})
        return event


def _emit(
    type: str,
    data: Any,
    *,
    version: int | None,
    occurred_at: datetime | None,
    idempotency_key: str | None,
    ordering_key: str | None,
    traceparent: str | None,
    tenant: str | None,
) -> Event:
    version = _validate(type, data, version, occurred_at, idempotency_key, ordering_key)
    event = Event(
        id=uuid.uuid4(),
        type=type,
        version=version,
        occurred_at=occurred_at or timezone.now(),
        data=data,
        idempotency_key=idempotency_key,
        ordering_key=ordering_key,
        traceparent=traceparent or tracing.from_opentelemetry() or "",
        tenant=tenant,
    )
    if idempotency_key is not None:
        existing = Event.objects.filter(idempotency_key=idempotency_key, tenant=tenant).first()
        if existing is not None:
            return existing
    payloads.offload_if_large(event)
    if idempotency_key is None:
        # No unique key can clash, so no savepoint: one INSERT in the caller's transaction,
        # or outside one an INSERT that commits by itself (no BEGIN and COMMIT to wait for).
        db = transaction.get_connection()
        manual = not db.get_autocommit() and not db.in_atomic_block  # the caller's transaction
        with transaction.atomic(savepoint=False) if manual else contextlib.nullcontext():
            event_insert(event)
            announce_event_emitted(event)
        return event
    try:
        # A savepoint, so a lost race on the idempotency key does not break the caller's
        # transaction.
        with transaction.atomic():
            event_insert(event)
            announce_event_emitted(event)
    except IntegrityError:
        payloads.discard([event.data_ref])  # the race's loser wrote a file nobody will read
        return Event.objects.get(idempotency_key=idempotency_key, tenant=tenant)
    return event
