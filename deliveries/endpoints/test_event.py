"""`webhook.test`: an operator checks one endpoint end to end with a harmless event.

An active endpoint gets it through the normal sending path. A suspended one sends nothing
through that path, so :func:`endpoint_test_now` sends the same signed request at once, from
the caller's process, and notes a success on the endpoint: the portal lets a tenant
resume what its failures suspended only after one.
"""

import uuid
from dataclasses import dataclass
from uuid import UUID

from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from deliveries import destinations
from deliveries.destinations import broker_urls
from deliveries.destinations.base import Credentials, Kind
from deliveries.endpoints.validation import ready as validation_ready
from deliveries.models import (
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointMode,
    EndpointState,
    Event,
)
from deliveries.pipeline.event_types import TEST_EVENT_TYPE
from deliveries.pipeline.wake import wake_endpoints
from deliveries.pipeline.wire import signing_keys
from deliveries.polling import waiters
from webhooks_core.egress import deadlines


class EndpointNotActive(Exception):
    """A test event would be held, not sent: the endpoint is suspended or disabled."""


def endpoint_send_test_event(*, endpoint_id: UUID, requested_by: str = "") -> Delivery:
    """Send a `webhook.test` event to this endpoint only, through the normal sending path
    (a polling endpoint's: into its feed, for its consumer to read).

    The event is written already fanned out, so no other endpoint (not even one subscribed
    to ``*``) receives it, and the sweeper never fans it out later.
    """
    now = timezone.now()
    with transaction.atomic():
        endpoint = Endpoint.objects.select_for_update(no_key=True).get(pk=endpoint_id)
        if endpoint.state != EndpointState.ACTIVE:
            raise EndpointNotActive(f"endpoint is {endpoint.state}")
        event = Event.objects.create(
            id=uuid.uuid4(),
            type=TEST_EVENT_TYPE,
            occurred_at=now,
            data={"endpoint_id": str(endpoint.pk), "requested_by": requested_by, "test": True},
            fanned_out_at=now,
            tenant=endpoint.tenant,
        )
        polled = endpoint.mode == EndpointMode.POLL
        delivery = Delivery.objects.create(
            event=event,
            endpoint=endpoint,
            # A polling endpoint's consumer reads it from its feed; nothing is sent.
            status=DeliveryStatus.AVAILABLE if polled else DeliveryStatus.PENDING,
            next_attempt_at=Now(),  # due by the database's clock, the claims' one
        )
        delivery.refresh_from_db(fields=["next_attempt_at"])
        if polled:
            transaction.on_commit(lambda: waiters.notify([endpoint.pk]), robust=True)
        else:
            transaction.on_commit(lambda: wake_endpoints([endpoint.pk]), robust=True)
    return delivery


@dataclass(frozen=True)
class TestEventResult:
    """What the endpoint answered a test event: ``status_code`` None when it did not
    (``failure`` says why in a few words; never a header or a secret)."""

    __test__ = False  # not a pytest class, whatever its name

    status_code: int | None
    duration_ms: float
    failure: str = ""
    # A broker destination took the message (brokers answer no HTTP status).
    delivered: bool = False

    @property
    def succeeded(self) -> bool:
        return self.delivered or (self.status_code is not None and 200 <= self.status_code < 300)


def endpoint_test_now(*, endpoint_id: UUID, requested_by: str = "") -> TestEventResult:
    """Send one `webhook.test` to a suspended endpoint now, signed as any delivery is.

    Nothing is queued or held and no delivery is written; a 2xx sets
    ``test_succeeded_at``, which the next state change clears.
    """
    endpoint = Endpoint.objects.get(pk=endpoint_id)
    if endpoint.state == EndpointState.ACTIVE:
        raise ValueError("an active endpoint gets test events through the sending path")
    now = timezone.now()
    event = Event(
        id=uuid.uuid4(),
        type=TEST_EVENT_TYPE,
        occurred_at=now,
        data={"endpoint_id": str(endpoint.pk), "requested_by": requested_by, "test": True},
        tenant=endpoint.tenant,
    )
    delivery = Delivery(event=event, endpoint=endpoint)
    if not validation_ready(endpoint):
        return TestEventResult(None, 0.0, "the target has not consented (CloudEvents handshake)")
    secrets = [secret.value for secret in endpoint.secrets.unexpired(now)]
    private_keys = signing_keys(endpoint, now)
    if not secrets or private_keys is None:
        return TestEventResult(None, 0.0, "the endpoint has no unexpired signing secret")
    # Through the endpoint's destination, as a delivery goes: its delivery auth (OAuth2,
    # mutual TLS) and the egress proxy apply to the test event too.
    outcome = destinations.for_url(endpoint.url).send(
        delivery,
        deadlines.after(endpoint.connect_timeout_seconds + endpoint.read_timeout_seconds),
        Credentials(secrets=secrets, private_keys=private_keys, timestamp=int(now.timestamp())),
    )
    # A broker destination answers no HTTP status: its acknowledgement is the success.
    delivered = outcome.status_code is None and outcome.kind == Kind.SUCCEEDED
    failure = ""
    if outcome.status_code is None and not delivered:
        failure = (
            "no OAuth2 token (the token endpoint failed)"
            if outcome.error.startswith("OAuth2 token")
            else "no answer (connection failed or timed out)"
        )
    if failure and broker_urls.is_broker_url(endpoint.url):
        # A broker's refusal, in its words (its URL's password is never in them).
        failure = outcome.error[:200] or failure
    result = TestEventResult(outcome.status_code, outcome.duration_ms, failure, delivered)
    if result.succeeded:
        # Only for the state it was sent in: a change meanwhile voids it.
        Endpoint.objects.filter(
            pk=endpoint.pk, state=endpoint.state, state_changed_at=endpoint.state_changed_at
        ).update(test_succeeded_at=timezone.now())
    return result
