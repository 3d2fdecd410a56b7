"""A real HTTP server on 127.0.0.1 that plays the webhook receiver in tests."""

import contextlib
import json
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class PeerServer(ThreadingHTTPServer):
    """The standard library's threading server with a real server's listening backlog.
    Its default of 5 drops the SYNs of a sender opening its lanes at once whenever the
    accepting thread is slow (a busy machine): the sender's connect then waits for the
    retransmission, a second, and meets its connect timeout (a fault of the test peer)."""

    request_queue_size = 1024


@dataclass
class ReceivedRequest:
    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay_seconds: float = 0.0


class Receiver:
    """Records every request; answers from a script of replies, then the default.

    ``OPTIONS`` requests (the CloudEvents handshake) are kept apart in ``options`` and
    answered by ``options_handler`` (405, as the spec says a target that does not handle
    OPTIONS answers, without one); ``requests`` holds the POSTs only.
    """

    def __init__(self) -> None:
        self.requests: list[ReceivedRequest] = []
        self.options: list[ReceivedRequest] = []
        self.options_handler: Callable[[ReceivedRequest], Reply] | None = None
        self.default = Reply()
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self.handler: Callable[[ReceivedRequest], Reply] | None = None
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self._connections: set[socket.socket] = set()
        # Set before it starts: the receiver speaks TLS with this context (`https` URLs).
        self.tls: ssl.SSLContext | None = None

    @property
    def url(self) -> str:
        if self.tls is not None:
            return f"https://localhost:{self.port}/hook"
        return f"http://127.0.0.1:{self.port}/hook"

    def script(self, *replies: Reply | int) -> None:
        with self._lock:
            self._script.extend(r if isinstance(r, Reply) else Reply(status=r) for r in replies)

    def _reply_for(self, request: ReceivedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            self._arrived.notify_all()
            if self.handler is not None:
                return self.handler(request)
            return self._script.popleft() if self._script else self.default

    def wait_for(self, count: int, timeout: float = 20.0) -> list[ReceivedRequest]:
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self.requests) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"expected {count} requests, got {len(self.requests)} in {timeout}s"
                    )
                self._arrived.wait(remaining)
            return list(self.requests)

    def wait_for_options(self, count: int, timeout: float = 20.0) -> list[ReceivedRequest]:
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self.options) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"expected {count} OPTIONS requests, got {len(self.options)} in {timeout}s"
                    )
                self._arrived.wait(remaining)
            return list(self.options)

    @classmethod
    @contextlib.contextmanager
    def running(cls, tls: ssl.SSLContext | None = None) -> Iterator["Receiver"]:
        receiver = cls()
        receiver.tls = tls
        receiver._start()
        try:
            yield receiver
        finally:
            receiver._stop()

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """The peer is gone (connections refused) until the block ends, then it listens
        again on the same port."""
        self._stop()
        try:
            yield
        finally:
            self._start()

    def _start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                receiver._connections.add(self.connection)

            def finish(self) -> None:
                receiver._connections.discard(self.connection)
                super().finish()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                if len(body) < length:
                    # The sender went away mid-request (a killed worker): like any server,
                    # drop the truncated request unanswered; it did not arrive.
                    self.close_connection = True
                    return
                request = ReceivedRequest(
                    path=self.path,
                    headers={k: v for k, v in self.headers.items()},
                    body=body,
                    received_at=time.time(),
                )
                reply = receiver._reply_for(request)
                if reply.delay_seconds:
                    time.sleep(reply.delay_seconds)
                with contextlib.suppress(OSError):
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)

            def do_OPTIONS(self) -> None:
                request = ReceivedRequest(
                    path=self.path,
                    headers={k: v for k, v in self.headers.items()},
                    body=b"",
                    received_at=time.time(),
                )
                with receiver._lock:
                    receiver.options.append(request)
                    receiver._arrived.notify_all()
                    handler = receiver.options_handler
                reply = handler(request) if handler is not None else Reply(405, b"")
                if reply.delay_seconds:
                    time.sleep(reply.delay_seconds)
                with contextlib.suppress(OSError):
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        server = PeerServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        if self.tls is not None:
            server.socket = self.tls.wrap_socket(server.socket, server_side=True)
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def _stop(self) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
        # Kept-alive connections outlive the listening socket; a peer that is down
        # answers none of them.
        for open_connection in list(self._connections):
            with contextlib.suppress(OSError):
                open_connection.shutdown(socket.SHUT_RDWR)


class PagesServer:
    """Answers every GET with the next scripted JSON page; records what it was sent."""

    def __init__(self) -> None:
        self.pages: list[dict[str, Any]] = []
        self.seen: list[tuple[str, str]] = []  # (path, Authorization)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.seen.append((self.path, self.headers.get("Authorization", "")))
                page = server.pages.pop(0) if server.pages else {"results": []}
                raw = json.dumps(page).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = PeerServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
