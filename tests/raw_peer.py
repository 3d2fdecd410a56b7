"""A raw HTTP/1.1 peer on 127.0.0.1 whose every answer a test scripts byte by byte
(framings, trickles, hang-ups that a real server would not produce), and the reading of
a request head that the test peers share."""

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# What the peer does with one request on a connection: it gets the request's head and
# body and the socket, and says whether the connection stays open for another.
Script = Callable[[bytes, bytes, socket.socket], bool]


class Peer:
    """A raw HTTP/1.1 server: each connection's requests answered by `script`."""

    def __init__(self, script: Script, tls: ssl.SSLContext | None = None) -> None:
        self.script = script
        self.tls = tls
        self.connections = 0
        self.hung_up = threading.Semaphore(0)  # released as the peer closes a connection
        self.requests: list[tuple[bytes, bytes]] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}/hook"
        self._lock = threading.Lock()

    def serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._talk, args=(connection,), daemon=True).start()

    def _talk(self, connection: socket.socket) -> None:
        try:
            if self.tls is not None:
                connection = self.tls.wrap_socket(connection, server_side=True)
            self._answer(connection)
        except OSError:
            pass  # the client dropped the connection (as some tests make it)
        finally:
            connection.close()
            self.hung_up.release()

    def _answer(self, connection: socket.socket) -> None:
        pending = b""
        while True:
            read = read_head(connection, pending)
            if read is None:
                return
            head, pending = read
            length = int(header(head, "Content-Length") or 0)
            while len(pending) < length:
                data = connection.recv(65536)
                if not data:
                    return  # the client hung up in the middle of its body
                pending += data
            body, pending = pending[:length], pending[length:]
            with self._lock:
                self.requests.append((head, body))
            if not self.script(head, body, connection):
                return

    @classmethod
    @contextmanager
    def running(cls, script: Script, tls: ssl.SSLContext | None = None) -> Iterator["Peer"]:
        peer = cls(script, tls)
        thread = threading.Thread(target=peer.serve, daemon=True)
        thread.start()
        try:
            yield peer
        finally:
            # (A shut-down listening socket wakes its `accept`; a closed one does not.)
            with contextlib.suppress(OSError):
                peer._server.shutdown(socket.SHUT_RDWR)
            peer._server.close()
            thread.join(5)


def header(head: bytes, name: str) -> str | None:
    for line in head.decode("latin-1").split("\r\n")[1:]:
        key, _, value = line.partition(":")
        if key.strip().lower() == name.lower():
            return value.strip()
    return None


def read_head(connection: socket.socket, pending: bytes = b"") -> tuple[bytes, bytes] | None:
    """The next request head off `connection` (after what was already read, `pending`),
    and what came after it; None when the client closes first."""
    while b"\r\n\r\n" not in pending:
        data = connection.recv(65536)
        if not data:
            return None
        pending += data
    head, _, rest = pending.partition(b"\r\n\r\n")
    return head, rest


# Answers that end with their connection (its socket let go of by `http.client` as the
# answer starts), each framing a trickling receiver may use.
ENDS_WITH_CONNECTION = {
    "connection-close": b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 100000\r\n\r\n",
    "no-length": b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n",  # read to its end
    "http-1.0": b"HTTP/1.0 200 OK\r\nContent-Length: 100000\r\n\r\n",
}


# Long past any deadline a test sets, short enough that a request the deadline fails to
# end fails its test in seconds rather than at the suite's per-test timeout.
TRICKLE_SECONDS = 10.0


@contextmanager
def trickling(head: bytes, tls: ssl.SSLContext | None = None) -> Iterator[Peer]:
    """A peer that answers every request with `head` and then a byte every 0.2 s, well
    within any read timeout, for `TRICKLE_SECONDS` or until the test is done with it."""
    stop = threading.Event()

    def trickle(head_in: bytes, body: bytes, connection: socket.socket) -> bool:
        connection.sendall(head)
        ends = time.monotonic() + TRICKLE_SECONDS
        while not stop.wait(0.2) and time.monotonic() < ends:
            connection.sendall(b"x")
        return False

    with Peer.running(trickle, tls) as peer:
        try:
            yield peer
        finally:
            stop.set()
