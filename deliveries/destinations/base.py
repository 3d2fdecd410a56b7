"""The attempt stage's one interface: a destination kind sends one delivery.

The owner (`pipeline.owner`) claims, gates, records and retries the same way whatever
the endpoint's URL names; a destination only sends: `send(delivery, deadline,
credentials) -> Outcome`. HTTP is one kind (`http`); others (a broker, a queue) plug in
by URL scheme through `destinations.register`, and get the same claims, retries, dead
letters, breaker, rate limits, ordering and records.
"""

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from deliveries.pipeline.wire import build_headers, render_body
from webhooks_core import tracing
from webhooks_core.egress.deadlines import Deadline

if TYPE_CHECKING:
    from deliveries.models import Delivery


class Kind(enum.StrEnum):
    SUCCEEDED = "succeeded"
    # Try again by the endpoint's retry policy (honouring `retry_after`).
    RETRY = "retry"
    # Never again (the endpoint refused for good, e.g. 401, 403 or 410).
    DEAD = "dead"
    # Not sent, for reasons of ours; due again later without spending an attempt.
    DEFER = "defer"


@dataclass(frozen=True)
class Credentials:
    """What signs a round's requests, read by the owner once per round."""

    secrets: list[str]
    private_keys: list[str]
    timestamp: int


@dataclass(frozen=True)
class Outcome:
    """What one attempt came to, with what its attempt record needs."""

    kind: Kind
    status_code: int | None = None
    retry_after: str | None = None
    error: str = ""
    # None when nothing was sent (no attempt record beyond the error).
    started_at: datetime | None = None
    duration_ms: float = 0.0
    request_headers: dict[str, str] = field(default_factory=dict)
    response_body: str = ""
    # Failed on our side (nothing reached the endpoint): recorded and retried, but says
    # nothing of the endpoint's health.
    local_failure: bool = False

    @property
    def no_answer(self) -> bool:
        """A request went out and nothing came back (a timeout, a refused connection)."""
        return self.started_at is not None and self.status_code is None and not self.local_failure


class Destination(Protocol):
    def send(self, delivery: "Delivery", deadline: Deadline, credentials: Credentials) -> Outcome:
        """Send once, over by `deadline`; never raises for the endpoint's behaviour."""
        ...


def signed_message(
    delivery: "Delivery", credentials: Credentials, span: object
) -> tuple[bytes, dict[str, str]]:
    """One attempt's body and headers, the same on every kind: rendered, signed with the
    round's credentials, and carrying the attempt span's `traceparent` (the endpoint's or
    consumer's span becomes its child). Raises `payloads.PayloadUnavailable`."""
    body = render_body(delivery.event, delivery.endpoint)
    headers = build_headers(
        delivery,
        body,
        credentials.secrets,
        timestamp=credentials.timestamp,
        private_keys=credentials.private_keys,
    )
    traced = tracing.traceparent_of(span)
    if traced:
        headers["traceparent"] = traced
    return body, headers
