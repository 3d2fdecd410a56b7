"""Read a request's whole body before Django runs (WSGI middleware, in ``wsgi.py``).

The web process runs gunicorn's gevent worker, so a client that sends its body one byte
every few seconds costs a greenlet and a socket, not one of a few threads. But Django reads
the body only when a view asks for it, after the middleware, the URL resolution and often
a database query (the receiver looks its source up, the API its token): a slow body would
then hold a database connection for as long as the client likes. Reading it here first
means no Django code, and no connection, is involved until the body is complete.

Two more things come from reading it here:

* a deadline: a body not complete within ``BODY_TIMEOUT_SECONDS`` is answered ``408`` and
  the connection closed (only under gevent, where the wait can be interrupted);
* ``Transfer-Encoding: chunked`` bodies (no ``Content-Length``), which Django reads as
  empty, reach it with their length, up to ``MAX_BODY_BYTES`` (``413`` beyond).

A declared ``Content-Length`` over the limit is not read at all: the view refuses it by
its declared size, as before.

Nobody gets a body read before they are known: a request to the API
without a valid bearer token is handed to Django unread (it answers 401 without reading);
a request to a receiving source is read up to that source's own ``max_body_bytes`` (over
it: 413), and for an unknown or disabled slug not at all (404). The database connection
these look-ups open is given back before the body is read, when it is pooled or a
greenlet's (a worker thread keeps its own persistent connection).
"""

import contextlib
import json
import tempfile
import time
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import IO, Any

# (Named as gevent's own: the tests replace it.)
from webhooks_core.runtime.cooperative import patched as is_module_patched

# The largest body any view takes: a receiving source's own limit (`max_body_bytes`) is at
# most this.
MAX_BODY_BYTES = 10 * 1024 * 1024
BODY_TIMEOUT_SECONDS = 30.0
# Bodies up to this size stay in memory; larger ones spill to a temporary file.
IN_MEMORY_BYTES = 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class _TooLarge(Exception):
    pass


class _Incomplete(Exception):
    pass


class BufferedBody:
    def __init__(
        self,
        app: WSGIApp,
        max_bytes: int = MAX_BODY_BYTES,
        timeout_seconds: float = BODY_TIMEOUT_SECONDS,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_seconds = timeout_seconds

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        declared = environ.get("CONTENT_LENGTH") or ""
        if not (chunked or (declared.isdigit() and int(declared) > 0)):
            return self.app(environ, start_response)
        allowed = body_allowed(environ, self.max_bytes)
        if allowed == 0:
            return self.app(environ, start_response)
        if chunked and environ.get("wsgi.input_terminated"):
            limit = allowed
        elif declared.isdigit() and 0 < int(declared) <= allowed:
            limit = int(declared)
        else:
            return self.app(environ, start_response)
        try:
            with _deadline(self.timeout_seconds):
                body = _read(environ["wsgi.input"], limit, allow_more=chunked)
        except _TooLarge:
            return _answer(start_response, "413 Content Too Large", "body too large")
        except _Timeout:
            return _answer(start_response, "408 Request Timeout", "request body too slow")
        except _Incomplete:
            # The client went away mid-body: never hand a truncated body to a view.
            return _answer(start_response, "400 Bad Request", "request body incomplete")
        environ["wsgi.input"] = body
        environ["CONTENT_LENGTH"] = str(body.tell())
        body.seek(0)
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        return self.app(environ, start_response)


def body_allowed(environ: dict[str, Any], most: int) -> int:
    """How many bytes of this request's body may be read before Django runs: 0 for an API
    request without a valid token or a receiver request to an unknown slug, the source's
    own limit for a known one, ``most`` for anything else."""
    from django.db import DatabaseError, connections
    from django.urls import Resolver404, resolve

    try:
        match = resolve(environ.get("PATH_INFO", "") or "/")
    except Resolver404:
        return 0
    except Exception:  # a URLconf problem is Django's to report
        return most
    view = match.func
    try:
        from receivers.views import receive

        if view is receive:
            return _source_limit(environ, str(match.kwargs.get("slug", "")))
        view_class = getattr(view, "cls", None)
        from rest_framework.views import APIView

        if isinstance(view_class, type) and issubclass(view_class, APIView):
            return most if _authenticated(environ, view_class) else 0
        return most
    except DatabaseError:
        return 0  # Django answers 503 without the body
    finally:
        for connection in connections.all(initialized_only=True):
            if _shared_while_the_body_comes(connection):
                connection.close()


def _shared_while_the_body_comes(connection: Any) -> bool:
    """Whether a connection would be kept from others while a slow client sends its body:
    a pooled one (given back, cheaply) and a greenlet's (one per request). A thread's own
    persistent connection is kept: nobody else could use it while the thread waits, and
    closing it would cost a new PostgreSQL backend on every request."""
    if connection.in_atomic_block:
        return False
    return getattr(connection, "pool", None) is not None or is_module_patched("threading")


def _source_limit(environ: dict[str, Any], slug: str) -> int:
    from receivers import kept_source

    # The view's own look-up, kept for it (receivers/kept_source.py).
    found = kept_source.look_up(environ, slug)
    return int(found.source.max_body_bytes or 0) if found is not None else 0


def _authenticated(environ: dict[str, Any], view_class: type[Any]) -> bool:
    from django.core.handlers.wsgi import WSGIRequest
    from django.http.request import HttpHeaders
    from rest_framework.exceptions import APIException
    from rest_framework.request import Request

    from webhooks_core.api.authentication import (
        AUTHENTICATED_ENVIRON_KEY,
        BearerTokenAuthentication,
    )

    request: Any = None
    for authentication in getattr(view_class, "authentication_classes", []):
        try:
            if issubclass(authentication, BearerTokenAuthentication):
                # It reads the request's headers only: no request to build.
                headers = SimpleNamespace(META=environ, headers=HttpHeaders(environ))
                result = authentication().authenticate(headers)
            else:
                request = request or Request(WSGIRequest(dict(environ, CONTENT_LENGTH="0")))
                result = authentication().authenticate(request)
            if result is not None:
                if issubclass(authentication, BearerTokenAuthentication):
                    # Kept for the view (no second look-up); see the key's doc.
                    header = environ.get("HTTP_AUTHORIZATION", "")
                    environ[AUTHENTICATED_ENVIRON_KEY] = (header, time.monotonic(), result)
                return True
        except APIException:
            return False
    return not getattr(view_class, "authentication_classes", [])


def _read(stream: IO[bytes], limit: int, *, allow_more: bool) -> IO[bytes]:
    """Up to ``limit`` bytes (all of them unless the client stops); more is an error
    only for a chunked body, whose size nobody declared."""
    body = tempfile.SpooledTemporaryFile(max_size=IN_MEMORY_BYTES)  # noqa: SIM115
    remaining = limit + 1 if allow_more else limit
    while remaining > 0:
        chunk = stream.read(min(READ_CHUNK_BYTES, remaining))
        if not chunk:
            break
        body.write(chunk)
        remaining -= len(chunk)
    if allow_more and body.tell() > limit:
        raise _TooLarge
    if not allow_more and body.tell() < limit:
        raise _Incomplete
    return body


def _answer(start_response: StartResponse, status: str, detail: str) -> Iterable[bytes]:
    payload = json.dumps({"detail": detail}).encode()
    headers = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(payload))),
        ("Connection", "close"),
    ]
    start_response(status, headers)
    return [payload]


try:
    from gevent import Timeout as _GeventTimeout
except ImportError:  # pragma: no cover - gevent is a dependency; kept optional for hosts
    _GeventTimeout = None


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: float) -> Any:
    # Only a greenlet's wait can be cut short from outside; a thread's cannot.
    if _GeventTimeout is None or not is_module_patched("socket"):
        yield
        return
    timer = _GeventTimeout(seconds, _Timeout)
    timer.start()
    try:
        yield
    finally:
        timer.close()
