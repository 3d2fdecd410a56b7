"""NATS JetStream endpoints (`nats://…?subject=`): a publish counts once the stream
acknowledges it; `Nats-Msg-Id` is the webhook id, so JetStream's duplicate window drops
a retry's second copy.

Why a small synchronous client and not nats-py: nats-py is asyncio-only, and the
delivery worker runs Celery's gevent pool (and must also run on prefork and threads).
An asyncio loop inside a gevent worker needs its own OS thread, a hop across threads
for every publish, and care that the patched socket module does not reach the loop.
What a publisher needs of the protocol is small and stable (INFO, CONNECT, PING/PONG,
SUB to an inbox, HPUB, the MSG/HMSG that answers it): over a plain blocking socket it
cooperates under gevent by the standard monkey-patching and blocks only its own thread
elsewhere, with the same deadline watchdog as HTTP. The tests cross-check it against
nats-py as the consumer.
"""

import json
import secrets
import socket
import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deliveries.destinations.base import Credentials, Outcome
from deliveries.destinations.broker_urls import BrokerURL, checked_address
from deliveries.destinations.brokers import (
    Message,
    NotAcknowledged,
    Pool,
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

CLIENT_NAME = "django-reliable-webhooks"
MAX_LINE = 64 * 1024


class ProtocolError(Exception):
    pass


@dataclass
class NatsConnection:
    sock: Any
    inbox: str
    buffer: bytearray = field(default_factory=bytearray)
    sequence: int = 0
    max_payload: int = 1024 * 1024

    # -- reading ----------------------------------------------------------------------
    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the NATS server closed the connection")
        self.buffer += chunk

    def _line(self) -> bytes:
        while True:
            end = self.buffer.find(b"\r\n")
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[: end + 2]
                return line
            if len(self.buffer) > MAX_LINE:
                raise ProtocolError("a protocol line is too long")
            self._fill()

    def _exactly(self, size: int) -> bytes:
        while len(self.buffer) < size + 2:
            self._fill()
        data = bytes(self.buffer[:size])
        del self.buffer[: size + 2]  # the payload's trailing CRLF
        return data

    def next_op(self) -> tuple[str, list[str], bytes, bytes]:
        """The next operation that matters: (op, args, headers block, payload); answers
        the server's PINGs and skips INFO updates and +OK on the way."""
        while True:
            line = self._line()
            op, _, rest = line.partition(b" ")
            name = op.upper().decode("ascii", "replace")
            if name == "PING":
                self.sock.sendall(b"PONG\r\n")
            elif name in ("INFO", "+OK"):
                continue
            elif name == "-ERR":
                return name, [rest.decode("utf-8", "replace").strip(" '")], b"", b""
            elif name == "MSG":
                args = rest.decode().split()
                return name, args, b"", self._exactly(int(args[-1]))
            elif name == "HMSG":
                args = rest.decode().split()
                header_size, total = int(args[-2]), int(args[-1])
                data = self._exactly(total)
                return name, args, data[:header_size], data[header_size:]
            else:
                return name, [rest.decode("utf-8", "replace")], b"", b""

    # -- publishing -------------------------------------------------------------------
    def publish(self, subject: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
        """HPUB with a reply inbox; returns JetStream's acknowledgement as JSON."""
        self.sequence += 1
        reply = f"{self.inbox}.{self.sequence}"
        block = "NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        header_bytes = block.encode("latin-1")
        if len(header_bytes) + len(body) > self.max_payload:
            raise Refused(
                f"the message is larger than the server's max_payload ({self.max_payload})"
            )
        head = f"HPUB {subject} {reply} {len(header_bytes)} {len(header_bytes) + len(body)}\r\n"
        self.sock.sendall(head.encode() + header_bytes + body + b"\r\n")
        while True:
            op, args, header_block, payload = self.next_op()
            if op == "-ERR":
                raise _error(args[0])
            if op not in ("MSG", "HMSG"):
                raise ProtocolError(f"unexpected {op!r} from the server")
            if args[0] != reply:
                continue  # an answer to an earlier publish that a deadline cut short
            if op == "HMSG":
                status = header_block.split(b"\r\n", 1)[0].split()
                if len(status) > 1 and status[1] == b"503":
                    raise Refused(f"no JetStream stream listens on the subject {subject!r}")
                if len(status) > 1:
                    raise NotAcknowledged(f"NATS status {b' '.join(status[1:]).decode()}")
            try:
                answer = json.loads(payload)
            except ValueError:
                raise NotAcknowledged("the answer is not a JetStream acknowledgement") from None
            if not isinstance(answer, dict) or "stream" not in answer:
                error = answer.get("error", {}) if isinstance(answer, dict) else {}
                raise NotAcknowledged(
                    f"JetStream answered {error.get('code', '?')}: "
                    f"{error.get('description', 'no acknowledgement')}"
                )
            return answer


def _error(text: str) -> Exception:
    lowered = text.lower()
    if "authorization" in lowered or "authentication" in lowered or "permissions" in lowered:
        return Refused(f"NATS: {text}")
    return NotAcknowledged(f"NATS: {text}")


def _connect(broker: BrokerURL, deadline: Deadline, policy: AddressPolicy) -> NatsConnection:
    address = checked_address(broker, policy)
    sock: Any = socket.create_connection((address, broker.port), timeout=remaining(deadline))
    holder = Socket(sock)
    try:
        deadlines.attach_current(holder)  # raises if the request was cut meanwhile
        connection = NatsConnection(sock, inbox=f"_INBOX.{secrets.token_hex(11)}")
        op, args, _, _ = _first(connection)
        info = json.loads(args[0]) if op == "INFO" else {}
        if info.get("tls_required"):
            context = ssl.create_default_context()
            sock = context.wrap_socket(sock, server_hostname=broker.host)
            connection.sock = holder.sock = sock
        connection.max_payload = int(info.get("max_payload") or connection.max_payload)
        options: dict[str, Any] = {
            "verbose": False,
            "pedantic": False,
            "tls_required": bool(info.get("tls_required")),
            "name": CLIENT_NAME,
            "lang": "python",
            "version": "0.1",
            "protocol": 1,
            "headers": True,
            "no_responders": True,
        }
        if broker.username and broker.password:
            options.update(user=broker.username, **{"pass": broker.password})
        elif broker.username:
            options["auth_token"] = broker.username
        elif broker.password:
            options["auth_token"] = broker.password
        connection.sock.sendall(
            f"CONNECT {json.dumps(options)}\r\nSUB {connection.inbox}.* 1\r\nPING\r\n".encode()
        )
        while True:
            op, args, _, _ = connection.next_op()
            if op == "PONG":
                return connection
            if op == "-ERR":
                raise _error(args[0])
    except BaseException:
        sock.close()
        raise


def _first(connection: NatsConnection) -> tuple[str, list[str], bytes, bytes]:
    line = connection._line()
    op, _, rest = line.partition(b" ")
    return op.upper().decode("ascii", "replace"), [rest.decode()], b"", b""


_pool: Pool[NatsConnection] = Pool(close=lambda connection: connection.sock.close())


def _publish(broker: BrokerURL, message: Message, deadline: Deadline, policy: AddressPolicy) -> str:
    answer = _pool.run(
        broker.pool_key,
        deadline,
        connect=lambda: _connect(broker, deadline, policy),
        use=lambda c: c.publish(broker.params["subject"], message.headers, message.body),
        socket_of=lambda c: c.sock,
        stale=(OSError, ProtocolError),
    )
    duplicate = " (a duplicate: JetStream kept the first copy)" if answer.get("duplicate") else ""
    return f"stream {answer['stream']} seq {answer.get('seq')}{duplicate}"


class NatsDestination:
    def send(self, delivery: "Delivery", deadline: Deadline, credentials: Credentials) -> Outcome:
        return send(
            delivery,
            deadline,
            credentials,
            _publish,
            extra_headers=lambda message: {"Nats-Msg-Id": message.event_id},
        )
