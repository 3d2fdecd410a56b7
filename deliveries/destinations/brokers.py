"""What the broker destinations (amqp, nats, redis) share.

Each message carries exactly what an HTTP endpoint would get: the same body bytes
(`wire.render_body`) and the same headers under the same names and values
(`wire.build_headers`), so a consumer verifies it with the Standard Webhooks libraries
as an endpoint would. A send never raises: the broker's answer becomes an `Outcome` as an
HTTP status would (down, refusing or no acknowledgement: RETRY; a refusal that no retry
changes, such as bad credentials or a missing exchange: DEAD with the broker's reason).

Connections are pooled per broker (scheme, address, user, virtual host or database) per
process and reused by every thread or greenlet that sends; a connection that failed, or
that a deadline cut short, is closed, never reused. A forked child starts empty.
"""

import contextlib
import os
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from django.utils import timezone

from deliveries import conf
from deliveries.destinations.base import Credentials, Kind, Outcome, signed_message
from deliveries.destinations.broker_urls import BrokerURL, BrokerURLInvalid, parse
from deliveries.pipeline import payloads
from deliveries.pipeline.wire import redact_headers
from webhooks_core import tracing
from webhooks_core.egress import deadlines
from webhooks_core.egress.deadlines import Deadline
from webhooks_core.egress.ssrf import AddressPolicy

if TYPE_CHECKING:
    from deliveries.models import Delivery

C = TypeVar("C")
R = TypeVar("R")
#: Idle connections kept per broker; more at once still open, and close after use.
MAX_IDLE_PER_BROKER = 32


class Pool(Generic[C]):
    """Idle connections by broker, shared by the threads (or greenlets) of one process."""

    def __init__(self, close: Callable[[C], None]) -> None:
        self._close = close
        self._idle: dict[Hashable, list[C]] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def take(self, key: Hashable) -> C | None:
        with self._lock:
            if self._pid != os.getpid():
                # A forked child must not share its parent's sockets.
                self._idle, self._pid = {}, os.getpid()
            idle = self._idle.get(key)
            return idle.pop() if idle else None

    def give_back(self, key: Hashable, connection: C) -> None:
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < MAX_IDLE_PER_BROKER and self._pid == os.getpid():
                idle.append(connection)
                return
        self.discard(connection)

    def discard(self, connection: C) -> None:
        # Closing a broken connection may fail too; it is dropped either way.
        with contextlib.suppress(Exception):
            self._close(connection)

    def run(
        self,
        key: Hashable,
        deadline: Deadline,
        connect: Callable[[], C],
        use: Callable[[C], R],
        socket_of: Callable[[C], Any],
        stale: tuple[type[BaseException], ...],
    ) -> R:
        """`use` an idle connection of this broker, or a new one, within `deadline`.

        An idle connection found broken (``stale``: the broker restarted, a firewall
        dropped it) is replaced once, so a restart costs no attempt; a message that may
        have gone out on it goes out again, which at-least-once delivery allows (JetStream
        drops the copy by its Nats-Msg-Id).
        """
        deadlines.arm(deadline)
        try:
            connection = self.take(key)
            if connection is not None:
                try:
                    result = self._use(connection, use, socket_of, deadline)
                except stale:
                    self.discard(connection)
                    if deadline.fired:
                        raise
                except BaseException:
                    # A refusal may leave the connection half-closed (AMQP closes the
                    # channel): never reused.
                    self.discard(connection)
                    raise
                else:
                    return self._done(key, connection, deadline, result)
            connection = connect()
            try:
                result = self._use(connection, use, socket_of, deadline)
            except BaseException:
                self.discard(connection)
                raise
            return self._done(key, connection, deadline, result)
        finally:
            deadlines.finish(deadline)

    @staticmethod
    def _use(
        connection: C, use: Callable[[C], R], socket_of: Callable[[C], Any], deadline: Deadline
    ) -> R:
        sock = socket_of(connection)
        deadlines.attach_current(Socket(sock))
        sock.settimeout(remaining(deadline))
        return use(connection)

    def _done(self, key: Hashable, connection: C, deadline: Deadline, result: R) -> R:
        # A connection the deadline cut short may have half a frame in flight: never reused.
        if deadlines.finish(deadline):
            self.discard(connection)
        else:
            self.give_back(key, connection)
        return result

    def clear(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                self.discard(connection)


class Refused(Exception):
    """The broker refused the message for good (DEAD); the text says why."""


class NotAcknowledged(Exception):
    """The broker did not take the message (RETRY); the text says why."""


@dataclass
class Socket:
    """What the deadline watchdog shuts: it reads ``.sock``."""

    sock: Any


def remaining(deadline: Deadline) -> float:
    return max(deadline.at - time.monotonic(), 0.001)


@dataclass(frozen=True)
class Message:
    body: bytes
    headers: dict[str, str]
    event_id: str
    event_type: str


Publish = Callable[[BrokerURL, Message, Deadline, AddressPolicy], str]


#: OpenTelemetry's `messaging.system` of each scheme.
SYSTEMS = {
    "amqp": "rabbitmq",
    "amqps": "rabbitmq",
    "nats": "nats",
    "redis": "redis",
    "rediss": "redis",
}
#: The query parameter that names where each kind publishes.
TARGETS = ("exchange", "subject", "stream")


def send(
    delivery: "Delivery",
    deadline: Deadline,
    credentials: Credentials,
    publish: Publish,
    extra_headers: Callable[[Message], dict[str, str]] | None = None,
) -> Outcome:
    """Render, sign and `publish` one delivery, in a producer span when tracing is on;
    the broker's answer as an `Outcome`.

    ``publish`` returns what the attempt's record shows as the answer (e.g. the stream
    and sequence number), raises `Refused` or `NotAcknowledged`, or any OSError / library
    error for a broker that is down or went away (all RETRY).
    """
    endpoint = delivery.endpoint
    try:
        broker = parse(endpoint.url_plain())
    except BrokerURLInvalid as exc:
        return Outcome(Kind.DEAD, error=f"the endpoint's URL cannot be used: {exc}")
    destination = next(
        (
            broker.params[name]
            for name in ("exchange", "subject", "stream")
            if name in broker.params
        ),
        "",
    )
    with tracing.span(
        f"send {destination}",
        kind="PRODUCER",
        traceparent=delivery.event.traceparent or None,
        attributes={
            "messaging.system": SYSTEMS.get(broker.scheme, broker.scheme),
            "messaging.operation.type": "send",
            "messaging.destination.name": destination,
            "messaging.message.id": str(delivery.event_id),
            "server.address": broker.host,
            "server.port": broker.port,
            "webhooks.attempt": delivery.attempts,
            "webhooks.delivery.id": delivery.pk,
            "webhooks.endpoint.id": str(delivery.endpoint_id),
            "webhooks.event.id": str(delivery.event_id),
            "webhooks.event.type": delivery.event.type,
        },
    ) as span:
        outcome = _send(delivery, broker, deadline, credentials, publish, extra_headers, span)
        tracing.attempt_outcome(span, status_code=None, outcome=outcome.kind, error=outcome.error)
        return outcome


def _send(
    delivery: "Delivery",
    broker: BrokerURL,
    deadline: Deadline,
    credentials: Credentials,
    publish: Publish,
    extra_headers: Callable[[Message], dict[str, str]] | None,
    span: object,
) -> Outcome:
    endpoint = delivery.endpoint
    try:
        body, headers = signed_message(delivery, credentials, span)
    except payloads.PayloadUnavailable as exc:
        return Outcome(Kind.RETRY, error=str(exc), local_failure=True)
    message = Message(body, headers, str(delivery.event_id), delivery.event.type)
    wire_headers = {**headers, **(extra_headers(message) if extra_headers else {})}
    stored = redact_headers(wire_headers, endpoint.secret_header_names)
    started_at = timezone.now()
    began = time.monotonic()

    def outcome(kind: Kind, error: str = "", answer: str = "") -> Outcome:
        return Outcome(
            kind,
            error=error,
            started_at=started_at,
            duration_ms=(time.monotonic() - began) * 1000,
            request_headers=stored,
            response_body=answer[: conf.get().response_body_limit],
        )

    try:
        answer = publish(
            broker,
            Message(body, wire_headers, message.event_id, message.event_type),
            deadline,
            # A URL a tenant chose in the portal connects under the portal's policy.
            conf.endpoint_address_policy(endpoint),
        )
    except Refused as exc:
        return outcome(Kind.DEAD, f"the broker refused the message: {exc}")
    except NotAcknowledged as exc:
        return outcome(Kind.RETRY, f"the broker did not take the message: {exc}")
    except Exception as exc:
        if deadline.fired:
            return outcome(Kind.RETRY, "timed out (the attempt's deadline passed)")
        return outcome(Kind.RETRY, f"broker unreachable: {type(exc).__name__}: {exc}")
    return outcome(Kind.SUCCEEDED, answer=answer)
