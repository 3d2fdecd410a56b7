"""Redis Streams endpoints (`redis(s)://…?stream=&maxlen=`): one XADD per attempt, one
field per header (names and values as on the HTTP wire) and the body in the field
`body`; ``maxlen`` trims the stream approximately (``MAXLEN ~``, the cheap form).

redis-py (already a dependency, as Celery's broker client): one connection pool per
broker per process, its connections opened only after the SSRF guard checked the
address, no client-side retries (the owner's retry policy decides), and the attempt's
total deadline enforced by the same watchdog as HTTP.
"""

from typing import TYPE_CHECKING, Any

import redis
from redis import exceptions as redis_errors
from redis.backoff import NoBackoff
from redis.retry import Retry

from deliveries.destinations.base import Credentials, Outcome
from deliveries.destinations.broker_urls import BrokerURL, checked_address
from deliveries.destinations.brokers import (
    Message,
    NotAcknowledged,
    Refused,
    Socket,
    remaining,
    send,
)
from webhooks_core.egress import deadlines
from webhooks_core.egress.deadlines import Deadline
from webhooks_core.egress.ssrf import AddressPolicy

if TYPE_CHECKING:
    from deliveries.models import Delivery

BODY_FIELD = "body"


class _Checked:
    """Every socket a pool opens goes to an address the guard admits (at connect time)."""

    policy: AddressPolicy
    broker: BrokerURL

    def _connect(self) -> Any:
        checked_address(self.broker, self.policy)
        return super()._connect()  # type: ignore[misc]


class _Connection(_Checked, redis.Connection):
    pass


class _SSLConnection(_Checked, redis.SSLConnection):
    pass


_pools: dict[tuple[Any, ...], redis.ConnectionPool] = {}


def _pool(broker: BrokerURL, policy: AddressPolicy, deadline: Deadline) -> redis.ConnectionPool:
    key = (*broker.pool_key, policy)
    pool = _pools.get(key)
    if pool is None:
        base = _SSLConnection if broker.tls else _Connection
        connection_class = type("BrokerConnection", (base,), {"policy": policy, "broker": broker})
        pool = redis.ConnectionPool(
            connection_class=connection_class,
            host=broker.host,
            port=broker.port,
            db=int(broker.path or 0),
            username=broker.username or None,
            password=broker.password or None,
            socket_connect_timeout=remaining(deadline),
            socket_timeout=remaining(deadline),
            retry=Retry(NoBackoff(), 0),
            max_connections=1024,
            client_name="django-reliable-webhooks",
        )
        # setdefault: two threads racing here keep one pool between them.
        pool = _pools.setdefault(key, pool)
    return pool


def _publish(broker: BrokerURL, message: Message, deadline: Deadline, policy: AddressPolicy) -> str:
    stream = broker.params["stream"]
    arguments: list[Any] = ["XADD", stream]
    if broker.params.get("maxlen"):
        arguments += ["MAXLEN", "~", int(broker.params["maxlen"])]
    arguments.append("*")
    for name, value in message.headers.items():
        if name == BODY_FIELD:
            continue  # a custom header cannot take the body's place
        arguments += [name, value.encode("latin-1")]
    arguments += [BODY_FIELD, message.body]
    pool = _pool(broker, policy, deadline)
    deadlines.arm(deadline)
    connection: Any = None
    try:
        try:
            # Opens (and authenticates) a connection when none is idle.
            connection = pool.get_connection()
            connection.connect()
            deadlines.attach_current(Socket(connection._sock))
            if connection._sock is not None:
                connection._sock.settimeout(remaining(deadline))
            connection.send_command(*arguments)
            entry = connection.read_response()
        except (
            redis_errors.AuthenticationError,
            redis_errors.AuthorizationError,
            redis_errors.NoPermissionError,
        ) as exc:
            raise Refused(f"Redis: {exc}") from None
        except redis_errors.ResponseError as exc:
            if str(exc).startswith("WRONGTYPE"):
                raise Refused(f"Redis: the key {stream!r} is not a stream ({exc})") from None
            # Out of memory, a read-only replica, still loading: another try may pass.
            raise NotAcknowledged(f"Redis: {exc}") from None
    except BaseException:
        if connection is not None:
            connection.disconnect()
            pool.release(connection)
        deadlines.finish(deadline)
        raise
    if deadlines.finish(deadline):
        connection.disconnect()
    pool.release(connection)
    entry_id = entry.decode() if isinstance(entry, bytes) else str(entry)
    return f"stream {stream} entry {entry_id}"


class RedisStreamDestination:
    def send(self, delivery: "Delivery", deadline: Deadline, credentials: Credentials) -> Outcome:
        return send(delivery, deadline, credentials, _publish)
