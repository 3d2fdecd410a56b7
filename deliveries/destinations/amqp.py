"""AMQP 0-9-1 endpoints (RabbitMQ and others; `amqp(s)://…?exchange=&routing_key=`).

py-amqp (Celery's own AMQP client, already installed through kombu) publishes each
message persistent (delivery mode 2), mandatory, on a channel in publisher-confirm mode:
the attempt succeeds once the broker confirms it, i.e. has routed it to a queue and, for
durable queues, written it to disk. An unroutable message (no queue bound for its
routing key) comes back and is retried; a missing exchange or refused credentials are a
refusal. py-amqp is synchronous over plain sockets, so it cooperates under gevent as it
blocks its own thread under the threads and prefork pools.
"""

import contextlib
from typing import TYPE_CHECKING

import amqp
from amqp import exceptions as amqp_errors

from deliveries.destinations.base import Credentials, Outcome
from deliveries.destinations.broker_urls import BrokerURL, checked_address
from deliveries.destinations.brokers import Message, NotAcknowledged, Pool, Refused, remaining, send
from webhooks_core.egress.deadlines import Deadline
from webhooks_core.egress.ssrf import AddressPolicy

if TYPE_CHECKING:
    from deliveries.models import Delivery

PERSISTENT = 2


def _connect(broker: BrokerURL, deadline: Deadline, policy: AddressPolicy) -> amqp.Connection:
    address = checked_address(broker, policy)
    host = f"[{address}]:{broker.port}" if ":" in address else f"{address}:{broker.port}"
    connection = amqp.Connection(
        host=host,
        userid=broker.username or "guest",
        password=broker.password or "guest",
        virtual_host=broker.path or "/",
        # The certificate is checked against the URL's host name, not the address.
        ssl={"context": {"check_hostname": True}, "server_hostname": broker.host}
        if broker.tls
        else False,
        connect_timeout=remaining(deadline),
        read_timeout=remaining(deadline),
        write_timeout=remaining(deadline),
        confirm_publish=True,
        client_properties={"product": "django-reliable-webhooks"},
    )
    try:
        connection.connect()
    except BaseException:
        _close(connection)
        raise
    return connection


def _close(connection: amqp.Connection) -> None:
    # A connection the broker already closed (refused login, channel error) may fail to
    # close again; its socket is dropped either way.
    # `_transport`: the public property warns (and raises) on a connection not open.
    sock = getattr(getattr(connection, "_transport", None), "sock", None)
    with contextlib.suppress(Exception):
        connection.collect()
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.close()


_pool: Pool[amqp.Connection] = Pool(close=_close)


def _publish(broker: BrokerURL, message: Message, deadline: Deadline, policy: AddressPolicy) -> str:
    exchange = broker.params["exchange"]
    routing_key = broker.params.get("routing_key", "")
    body_message = amqp.Message(
        message.body,
        content_type=message.headers.get("Content-Type", "application/json"),
        delivery_mode=PERSISTENT,
        message_id=message.event_id,
        type=message.event_type,
        application_headers=dict(message.headers),
    )

    def connect() -> amqp.Connection:
        try:
            return _connect(broker, deadline, policy)
        except amqp_errors.AccessRefused as exc:
            raise Refused(f"AMQP: access refused ({exc.reply_text or exc})") from None
        except amqp_errors.NotAllowed as exc:
            raise Refused(f"AMQP: not allowed ({exc.reply_text or exc})") from None

    def publish(connection: amqp.Connection) -> None:
        try:
            connection.channel(1).basic_publish(
                body_message,
                exchange=exchange,
                routing_key=routing_key,
                mandatory=True,
                timeout=remaining(deadline),
            )
        except amqp_errors.NotFound as exc:
            raise Refused(f"AMQP: {exc.reply_text or exc}") from None
        except amqp_errors.AccessRefused as exc:
            raise Refused(f"AMQP: access refused ({exc.reply_text or exc})") from None
        except amqp_errors.MessageNacked:
            raise NotAcknowledged("the broker nacked the message") from None
        except amqp_errors.ChannelError as exc:
            # NO_ROUTE (312) for a mandatory message no queue is bound for, among others.
            raise NotAcknowledged(f"AMQP {exc.reply_code}: {exc.reply_text or exc}") from None

    _pool.run(
        broker.pool_key,
        deadline,
        connect=connect,
        use=publish,
        socket_of=lambda connection: connection.transport.sock,
        stale=(OSError, amqp_errors.RecoverableConnectionError),
    )
    return f"confirmed by the broker (exchange {exchange!r}, routing key {routing_key!r})"


class AmqpDestination:
    def send(self, delivery: "Delivery", deadline: Deadline, credentials: Credentials) -> Outcome:
        return send(delivery, deadline, credentials, _publish)
