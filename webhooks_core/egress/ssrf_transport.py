"""The connect-time half of the SSRF guard, as urllib3 connection pools (and a `requests`
adapter built on them, for the receiving side's reconciliation). No Django here.

urllib3 opens every new connection through `_new_conn`. Our connection classes resolve the
host themselves, check every address against the policy of the request being sent, and open
the socket to a checked address, so a second DNS answer can never be used. TLS is untouched:
urllib3 still wraps the socket with SNI and certificate checks for the URL's host name.
Pooled keep-alive connections were checked when they were opened.

A name's resolution is part of its request: it ends at the request's deadline however long
the resolver takes (`resolve_within`).
"""

import contextlib
import contextvars
import ipaddress
import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError
from urllib3.util import connection as urllib3_connection

from webhooks_core.egress import deadlines
from webhooks_core.egress.ssrf import AddressPolicy, address_refusal
from webhooks_core.runtime import cooperative

# Per thread, and per greenlet where gevent runs (each has a context of its own): a
# context variable rather than a `threading.local`, whose first read in each new greenlet
# (an owner's lanes are new greenlets) built that greenlet's storage.
_policy: contextvars.ContextVar[AddressPolicy | None] = contextvars.ContextVar(
    "ssrf_policy", default=None
)


class AddressRefused(NewConnectionError):
    """The host resolves to an address the SSRF guard refuses; nothing was sent."""


@contextlib.contextmanager
def address_policy(policy: AddressPolicy | None) -> Iterator[None]:
    """Apply `policy` to the connections this thread opens inside the block."""
    # Restored by value, not by the set's token: a generator holding this block open
    # across its yields may be closed in another context, where a token's reset raises.
    previous = _policy.get()
    _policy.set(policy)
    try:
        yield
    finally:
        _policy.set(previous)


# Lookups run in these threads (greenlets under gevent) while their request waits at most
# until its deadline: a name whose DNS never answers costs its request no more than its
# deadline. A lookup given up on ends in the background (at most RESOLVER_THREADS at once;
# more wait their turn, within their own deadlines).
RESOLVER_THREADS = 16
_lookups: ThreadPoolExecutor | None = None
_lookups_pid = 0
_lookups_lock = threading.Lock()


def _lookup_pool() -> ThreadPoolExecutor:
    global _lookups, _lookups_pid
    with _lookups_lock:
        if _lookups is None or _lookups_pid != os.getpid():
            # Made in the process that sends (a forked child gets its own).
            _lookups = ThreadPoolExecutor(RESOLVER_THREADS, thread_name_prefix="webhooks-dns")
            _lookups_pid = os.getpid()
        return _lookups


def resolve_within(
    policy: AddressPolicy, host: str, port: int, deadline: deadlines.Deadline | None = None
) -> list[str]:
    """`policy.resolve(host, port)`, given up on (`TimeoutError`) at `deadline` (by
    default the current request's); an IP address or a request without a deadline
    resolves here, at once."""
    deadline = deadline or deadlines.current()
    try:
        ipaddress.ip_address(host)
        literal = True
    except ValueError:
        literal = False
    if deadline is None or literal:
        return policy.resolve(host, port)
    lookup = _lookup_pool().submit(contextvars.copy_context().run, policy.resolve, host, port)
    try:
        return lookup.result(timeout=max(deadline.at - time.monotonic(), 0.0))
    except FutureTimeout:
        lookup.cancel()
    deadline.fire()  # its time is up: the request is over, as the watchdog would say
    raise TimeoutError(f"resolving {host!r} did not end within the request's deadline")


def _open_checked_socket(conn: HTTPConnection) -> socket.socket:
    policy = _policy.get()
    if policy is None:
        return HTTPConnection._new_conn(conn)
    host = conn._dns_host
    try:
        addresses = resolve_within(policy, host, conn.port or 0)
    except TimeoutError as exc:
        raise ConnectTimeoutError(conn, str(exc)) from exc
    except OSError as exc:
        raise NewConnectionError(conn, f"Failed to resolve {host!r}: {exc}") from exc
    if not addresses:
        raise NewConnectionError(conn, f"{host!r} resolves to no address")
    for address in addresses:
        problem = address_refusal(address, policy)
        if problem:
            raise AddressRefused(conn, f"refused by the SSRF guard: {host} -> {problem}")
    last_error: OSError | None = None
    for address in addresses:
        try:
            return urllib3_connection.create_connection(
                (address, conn.port),
                conn.timeout,
                source_address=conn.source_address,
                socket_options=conn.socket_options,
            )
        except TimeoutError as exc:
            raise ConnectTimeoutError(
                conn, f"Connection to {host} timed out. (connect timeout={conn.timeout})"
            ) from exc
        except OSError as exc:
            last_error = exc
    raise NewConnectionError(conn, f"Failed to establish a new connection: {last_error}")


class _QuickDropCheck:
    """urllib3 asks whether a kept-alive connection was dropped before reusing it, through
    a zero-timeout poll; asked of the operating system directly (`cooperative`) rather
    than through gevent's hub, which costs five times as much for the same answer."""

    sock: socket.socket | None

    @property
    def is_connected(self) -> bool:
        # Readable while idle: the peer closed it (end of file) or said something
        # unasked for; either way it is not reused.
        return self.sock is not None and not cooperative.readable_now(self.sock.fileno())


class GuardedHTTPConnection(_QuickDropCheck, deadlines.DeadlineBoundConnection):
    def _new_conn(self) -> socket.socket:
        return _open_checked_socket(self)


class GuardedHTTPSConnection(_QuickDropCheck, deadlines.DeadlineBoundConnection, HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        return _open_checked_socket(self)


class GuardedHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = GuardedHTTPConnection


class GuardedHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = GuardedHTTPSConnection


# A urllib3 PoolManager's `pool_classes_by_scheme`: its pools open connections through
# the guard.
POOL_CLASSES: dict[str, type[HTTPConnectionPool]] = {
    "http": GuardedHTTPConnectionPool,
    "https": GuardedHTTPSConnectionPool,
}


class GuardedHTTPAdapter(HTTPAdapter):
    """An HTTPAdapter whose pools open connections through the SSRF guard."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = POOL_CLASSES
