"""Total deadlines for outbound requests. No Django here.

Socket timeouts bound each read, not a request: an endpoint that trickles its answer one
byte every few seconds never trips a 10 s read timeout. Every request we send registers
its connection here with the moment it must be over; one watchdog thread per process
(a greenlet under gevent) shuts the socket down at that moment, so the blocked read
returns at once, in threads and greenlets alike, and the attempt is recorded as a timeout.
The same handle lets an owner that loses its lease abort its requests (`abort`).
"""

import contextlib
import contextvars
import heapq
import itertools
import os
import socket
import threading
import time
from typing import Any

from urllib3.connection import HTTPConnection
from urllib3.response import HTTPResponse

_sequence = itertools.count()
# A deadline that passed while its connection was still opening is tried again this often.
RETRY_SECONDS = 0.05


class Deadline:
    """One request's deadline; the connection it uses is attached once it is known."""

    def __init__(self, at: float) -> None:
        self.at = at
        self.fired = False
        self._done = False
        self._connection: Any = None
        self._lock = threading.Lock()

    def attach(self, connection: Any) -> None:
        with self._lock:
            self._connection = connection

    def fire(self) -> bool:
        """Shut the request's socket (the deadline passed, or its owner aborts it);
        False while the socket is still being opened (the watchdog then tries again)."""
        with self._lock:
            if self._done:
                return True
            self.fired = True
            connection = self._connection
        return connection is not None and _shut(connection)

    def cut(self) -> None:
        """End the request now (its owner stops it): its socket is shut at once or, while
        it is still being opened, as soon as it exists (the watchdog tries again every
        `RETRY_SECONDS`), not at the deadline's own time."""
        with self._lock:
            self.at = min(self.at, time.monotonic())
            attached = self._connection is not None
        # A request with no connection yet sends nothing (`raise_if_cut`); one connecting
        # is watched until its socket exists (a deadline never disarmed is never watched).
        if not self.fire() and attached:
            _watchdog.watch(self)

    def rearm(self) -> bool:
        """Ready the same deadline for one more request (an attempt that fetches a token
        first, or sends again after a refreshed one): False once it has fired, its time
        is up or its owner aborted it."""
        with self._lock:
            if self.fired or self.at <= time.monotonic():
                return False
            self._done = False
            self._connection = None
            return True

    def disarm(self) -> bool:
        """The request is over; returns whether the deadline cut it short (its connection
        must then not be reused)."""
        with self._lock:
            self._done = True
            return self.fired


def _shut(connection: Any) -> bool:
    sock = getattr(connection, "sock", None)
    if sock is None:
        return False
    with contextlib.suppress(OSError):  # already closed
        sock.shutdown(socket.SHUT_RDWR)
    return True


class _Watchdog:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Deadline]] = []
        self._condition = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def watch(self, deadline: Deadline) -> None:
        with self._condition:
            if self._thread is None or self._pid != os.getpid():
                # Started in the process that sends (a forked child gets its own).
                self._heap = []
                self._pid = os.getpid()
                self._thread = threading.Thread(
                    target=self._run, name="webhooks-deadlines", daemon=True
                )
                self._thread.start()
            heapq.heappush(self._heap, (deadline.at, next(_sequence), deadline))
            if self._heap[0][2] is deadline:
                # Sooner than the one it waits for; otherwise it wakes in time anyway
                # (and a wake per request is a switch per request).
                self._condition.notify()

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._heap:
                    self._condition.wait()
                at, _, deadline = self._heap[0]
                wait = at - time.monotonic()
                if wait > 0:
                    self._condition.wait(min(wait, 1.0))
                    continue
                heapq.heappop(self._heap)
            if not deadline.fire():
                with self._condition:
                    again = (time.monotonic() + RETRY_SECONDS, next(_sequence), deadline)
                    heapq.heappush(self._heap, again)


_watchdog = _Watchdog()
# The request this thread (or greenlet) is sending: a context variable, not a
# `threading.local`, whose first use in each new greenlet (a lane each) built its storage.
_current: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "request_deadline", default=None
)


def current() -> Deadline | None:
    """The deadline of the request this thread (or greenlet) is sending, if any."""
    return _current.get()


def after(seconds: float) -> Deadline:
    """A deadline `seconds` from now (not watched until `arm`)."""
    return Deadline(time.monotonic() + max(seconds, 0.0))


def arm(deadline: Deadline) -> Deadline:
    """Watch the deadline; the connections this thread uses for a request until `finish`
    attach to it."""
    _current.set(deadline)
    _watchdog.watch(deadline)
    return deadline


def finish(deadline: Deadline) -> bool:
    """End the request's watch; returns whether its deadline cut it short."""
    if _current.get() is deadline:
        _current.set(None)
    return deadline.disarm()


class CutShort(OSError):
    """The request's deadline fired before anything was sent (its owner stopped it)."""


def attach_current(connection: Any) -> None:
    """Called by our connection classes as a request starts on `connection`; raises
    `CutShort` when its deadline has already fired."""
    deadline = _current.get()
    if deadline is not None:
        deadline.attach(connection)
    raise_if_cut()


class _Socket:
    """A socket held for its deadline alone (`_shut` asks for `.sock`)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock


def attach_socket(sock: socket.socket) -> None:
    """Attach the current request's deadline to `sock` itself: its connection let go of
    it while the answer is still read through it (`http.client` closes the connection
    of an answer that ends with it, the response reading on through its own handle), so
    the deadline must still reach it."""
    deadline = _current.get()
    if deadline is not None:
        deadline.attach(_Socket(sock))


def raise_if_cut() -> None:
    """Called by our connection classes once connected, before sending: a connect that
    was under way when the request was cut (its socket could not be shut yet) sends
    nothing."""
    deadline = _current.get()
    if deadline is not None and deadline.fired:
        raise CutShort("cut short before it was sent")


class DeadlineBoundConnection(HTTPConnection):
    """A urllib3 connection whose socket is within the current request's deadline from the
    moment it is opened until its answer is read. Mixed in before `HTTPSConnection` too.

    From the connect on: a proxy's `CONNECT` answer and a TLS handshake are part of the
    request. Before the answer: urllib3 may read a whole body inside `getresponse`
    (`preload_content`), and `http.client` lets go of the socket of an answer that ends
    with its connection (`Connection: close`, no length, HTTP/1.0), reading on through
    the response's own handle, so the deadline holds the socket itself by then."""

    def connect(self) -> None:
        attach_current(self)
        super().connect()
        raise_if_cut()

    def request(self, *args: Any, **kwargs: Any) -> None:
        attach_current(self)
        super().request(*args, **kwargs)

    def getresponse(self) -> HTTPResponse:  # type: ignore[override]
        if self.sock is not None:
            attach_socket(self.sock)
        return super().getresponse()
