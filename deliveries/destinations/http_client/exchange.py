"""One HTTP request and the start of its response, on a kept-alive connection of a urllib3
pool, through `http.client`'s own request and response. No Django here.

urllib3's `urlopen` wraps every request in machinery a delivery does not use: a timeout
object cloned per request, a request method that checks every header for its own
markers, a response object with a header dict and a decoder of its own, a retry object,
log calls, all of it CPU spent on every request of the delivery process (the capacity
page has the figures). What this keeps of urllib3: its pools (the same kept-alive
connections its own requests use), its connections (our SSRF-guarded classes, TLS as
urllib3 sets it up, the dropped-connection check before reuse, the deadline's hold from
the connect on) and its exceptions, raised for the same failures as `urlopen` raises
them, so a stored error reads as before.

A pool's `_get_conn` and `_put_conn` are the one private part of urllib3 used: they are
what `urlopen` itself calls around a request, unchanged through urllib3 1.x and 2.x.
"""

import errno
import http.client
import ssl
import zlib
from typing import Any

from urllib3.connectionpool import HTTPConnectionPool
from urllib3.exceptions import ProtocolError, ReadTimeoutError, SSLError

from webhooks_core.egress import deadlines

# http.client's own methods, called on urllib3's connection objects (subclasses of
# http.client's), past urllib3's overrides of them.
_putrequest = http.client.HTTPConnection.putrequest
_putheader = http.client.HTTPConnection.putheader
_endheaders = http.client.HTTPConnection.endheaders
_getresponse = http.client.HTTPConnection.getresponse

# A request without a body says `Content-Length: 0` unless its method is one of these
# (as urllib3 sends it).
_METHODS_NOT_EXPECTING_BODY = frozenset({"GET", "HEAD", "DELETE", "TRACE", "OPTIONS", "CONNECT"})
# A write the peer refused may still have an answer waiting (a 413 sent before it
# closed): the response is read anyway, as urllib3 does.
_ANSWER_MAY_FOLLOW = frozenset({errno.EPIPE, errno.ECONNRESET, errno.EPROTOTYPE})
_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class Exchange:
    """A request sent and its response's status line and headers read; the body is read
    by `read_excerpt`, and `finish` gives the connection back (kept alive or closed)."""

    def __init__(
        self, pool: HTTPConnectionPool, connection: Any, response: http.client.HTTPResponse
    ) -> None:
        self._pool = pool
        self._connection = connection
        self._response = response
        self.status = response.status

    def header(self, name: str) -> str | None:
        return self._response.getheader(name)

    def headers(self) -> dict[str, str]:
        """Every header once, under the letter case of its first line and with the value
        of its last (as a dict made of urllib3's header items, as a proxied request's
        are)."""
        last: dict[str, str] = {}
        names: dict[str, str] = {}
        for name, value in self._response.getheaders():
            last[names.setdefault(name.lower(), name)] = value
        return last

    def read_excerpt(self, read_limit: int, excerpt_limit: int) -> tuple[bytes, bool]:
        """The body's first `excerpt_limit` bytes (decoded, when the endpoint compressed
        it although we asked for none), and whether it was all read: at most
        `read_limit` bytes are read, so a hostile endpoint cannot fill our memory."""
        response = self._response
        chunks: list[bytes] = []
        total = 0
        ended = False
        try:
            while total <= read_limit:
                chunk = response.read(read_limit + 1 - total)
                if not chunk:
                    ended = True
                    break
                chunks.append(chunk)
                total += len(chunk)
        except (OSError, http.client.HTTPException) as exc:
            raise _read_error(self._pool, exc) from exc
        if ended and response.length:  # the connection ended before its Content-Length
            raise ProtocolError(
                "Connection broken: IncompleteRead",
                http.client.IncompleteRead(b"", response.length),
            )
        body = b"".join(chunks)
        return _decoded(body, response.getheader("Content-Encoding"), excerpt_limit), (
            total <= read_limit and response.isclosed()
        )

    def finish(self, reuse: bool) -> None:
        """Give the connection back to its pool: kept alive when `reuse` (the response
        read to its end, the request not cut short), else closed first."""
        if not reuse:
            self._response.close()
            self._connection.close()
        self._pool._put_conn(self._connection)


def send(
    pool: HTTPConnectionPool,
    method: str,
    target: str,
    body: bytes | None,
    headers: dict[str, str],
    *,
    connect_timeout: float,
    read_timeout: float,
) -> Exchange:
    """Send the request on a connection of `pool` and read its response's status line and
    headers. `headers` go as given (after `Host`, `Accept-Encoding: identity` and
    `Content-Length`, each unless given); urllib3's exceptions for the failures
    `urlopen` reports with them."""
    # A kept-alive one checked for a drop, or a new one: urllib3's connections are
    # http.client's (its `BaseHTTPConnection` is the protocol, not the class).
    connection: Any = pool._get_conn()
    try:
        # The request's total deadline may shut this connection's socket (`deadlines`).
        deadlines.attach_current(connection)
        connection.timeout = connect_timeout
        try:
            if connection.sock is None:
                connection.connect()  # (urllib3's own errors for a connection not made)
            else:
                connection.sock.settimeout(connect_timeout)
        except OSError as exc:
            raise _open_error(pool, exc, target, connect_timeout) from exc
        try:
            _write(connection, method, target, body, headers)
        except (OSError, http.client.HTTPException) as exc:
            if getattr(exc, "errno", None) not in _ANSWER_MAY_FOLLOW:
                # (A timeout while sending too: `urlopen` says "aborted", not "read".)
                raise _open_error(pool, exc, target, None) from exc
        try:
            sock = connection.sock
            sock.settimeout(read_timeout)
            response = _getresponse(connection)
        except (OSError, http.client.HTTPException) as exc:
            raise _open_error(pool, exc, target, read_timeout) from exc
        if connection.sock is None:
            # An answer that ends with its connection (`Connection: close`, no length):
            # http.client let go of the socket, which the body is still read through.
            # (`DeadlineBoundConnection.getresponse` does this before urllib3's own
            # reading; here, past it, nothing of the body has been read yet.)
            deadlines.attach_socket(sock)
    except BaseException:
        connection.close()
        pool._put_conn(connection)
        raise
    return Exchange(pool, connection, response)


def _write(
    connection: Any, method: str, target: str, body: bytes | None, headers: dict[str, str]
) -> None:
    names = {name.lower() for name in headers}
    _putrequest(
        connection,
        method,
        target,
        skip_host="host" in names,
        skip_accept_encoding="accept-encoding" in names,
    )
    if "content-length" not in names and "transfer-encoding" not in names:
        if body is not None:
            _putheader(connection, "Content-Length", str(len(body)))
        elif method.upper() not in _METHODS_NOT_EXPECTING_BODY:
            _putheader(connection, "Content-Length", "0")
    for name, value in headers.items():
        _putheader(connection, name, value)
    _endheaders(connection, body)


def _open_error(
    pool: HTTPConnectionPool, exc: BaseException, url: str, timeout: float | None
) -> Exception:
    """The urllib3 exception `urlopen` raises for `exc` while opening a connection,
    sending (`timeout` None), or waiting for the status line."""
    if timeout is not None and (
        isinstance(exc, TimeoutError)
        or getattr(exc, "errno", None) in (errno.EAGAIN, errno.EWOULDBLOCK)
    ):
        return ReadTimeoutError(pool, url, f"Read timed out. (read timeout={timeout})")
    if isinstance(exc, ssl.SSLError):  # (certificate errors included)
        return SSLError(exc)
    return ProtocolError("Connection aborted.", exc)


def _read_error(pool: HTTPConnectionPool, exc: BaseException) -> Exception:
    """The urllib3 exception its response raises for `exc` while reading the body."""
    if isinstance(exc, TimeoutError):
        return ReadTimeoutError(pool, None, "Read timed out.")
    if isinstance(exc, ssl.SSLError):
        if "read operation timed out" in str(exc):
            return ReadTimeoutError(pool, None, "Read timed out.")
        return SSLError(exc)
    return ProtocolError(f"Connection broken: {exc!r}", exc)


def _decoded(body: bytes, encoding: str | None, limit: int) -> bytes:
    """At most `limit` bytes of `body`, decompressed when it came gzip- or
    deflate-encoded (other encodings as they came); never more than `limit` produced, so
    a small compressed answer cannot grow into a large one."""
    if limit <= 0:
        return b""  # (zlib reads a limit of 0 as none at all)
    wbits = _DECODERS.get((encoding or "").strip().lower())
    if wbits is None or not body:
        return body[:limit]
    try:
        return zlib.decompressobj(wbits).decompress(body, limit)
    except zlib.error:
        return body[:limit]
