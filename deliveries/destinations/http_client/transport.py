"""Outbound HTTP. Returns a result object instead of raising, so the caller records every
outcome the same way. No Django here.

urllib3 directly, without `requests` on top: a delivery needs one POST with timeouts, no
redirects, no retries, no cookies, no proxies from the environment and a bounded read,
and `requests`' session machinery around that is CPU spent on every delivery. One
pool manager per process (and SSRF policy) is shared by every thread or greenlet that
sends, so a batch's concurrent requests and the next batch reuse the same kept-alive
connections; urllib3's pools are thread-safe, where a `requests.Session` is not
documented to be.
"""

import functools
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import urllib3
from requests.utils import check_header_validity
from urllib3.connectionpool import port_by_scheme
from urllib3.exceptions import HTTPError, URLSchemeUnknown
from urllib3.util.url import parse_url

from deliveries import conf, metrics
from deliveries.destinations.http_client import client_tls, egress_proxy, exchange
from webhooks_core.egress import deadlines
from webhooks_core.egress.ssrf import AddressPolicy, scheme_refusal
from webhooks_core.egress.ssrf_transport import POOL_CLASSES, AddressRefused, address_policy

USER_AGENT = "django-reliable-webhooks/0.1"
# Read at most this much of a response: enough to drain typical bodies so the connection
# can be reused, never so much that a hostile endpoint fills our memory.
MAX_RESPONSE_READ_BYTES = 64 * 1024
# Hosts with kept-alive connections, and idle connections kept per host (many endpoints may
# share one host, each with its in-flight limit); more at once still go out, their
# connections dropped after use.
POOLED_HOSTS = 256
CONNECTIONS_PER_HOST = 1024
# No retries and no redirects followed (a policy of our own: the owner retries). Built
# once: urllib3 builds one from `retries=False` on every request otherwise.
NO_RETRIES = urllib3.Retry(total=False, redirect=False)

# By (SSRF policy, client TLS fingerprint, egress proxy): a connection opened under one
# is only ever reused under an equal one. One per client certificate in use, so at most
# MAX_MANAGERS, least recently used first out: an evicted manager's idle connections are
# closed (a request still out on one finishes; its connection is then dropped).
MAX_MANAGERS = 256
_ManagerKey = tuple[AddressPolicy | None, str, str]
_managers: "OrderedDict[_ManagerKey, urllib3.PoolManager]" = OrderedDict()
_managers_lock = threading.Lock()


@dataclass(frozen=True)
class HttpResult:
    status_code: int | None
    body_excerpt: str
    retry_after: str | None
    error: str
    duration_ms: float
    # The response's headers (`request` only; a delivery's POST keeps none of them).
    headers: dict[str, str] = field(default_factory=dict)


def _manager(
    policy: AddressPolicy | None,
    tls: client_tls.ClientTLS | None = None,
    proxy_url: str = "",
) -> urllib3.PoolManager:
    """The pool manager of this policy, client certificate and proxy: a connection
    opened (and checked) under one is only ever reused under an equal one."""
    key = (policy, tls.fingerprint if tls else "", proxy_url)
    evicted: list[urllib3.PoolManager] = []
    with _managers_lock:
        manager = _managers.get(key)
        if manager is not None:
            _managers.move_to_end(key)
            return manager
        manager = _managers[key] = _new_manager(tls, proxy_url)
        while len(_managers) > MAX_MANAGERS:
            evicted.append(_managers.popitem(last=False)[1])
    for old in evicted:
        old.clear()
    return manager


def _new_manager(tls: client_tls.ClientTLS | None, proxy_url: str) -> urllib3.PoolManager:
    pool_kw: dict[str, Any] = {}
    if tls:
        # Built once per credential fingerprint (`client_tls.context_for`).
        pool_kw["ssl_context"] = client_tls.context_for(tls)
    if proxy_url:
        return egress_proxy.proxy_manager(
            proxy_url,
            num_pools=POOLED_HOSTS,
            maxsize=CONNECTIONS_PER_HOST,
            block=False,
            **pool_kw,
        )
    manager = urllib3.PoolManager(
        num_pools=POOLED_HOSTS, maxsize=CONNECTIONS_PER_HOST, block=False, **pool_kw
    )
    # Without a policy the guard's classes open connections unchecked; they still attach
    # every request to its total deadline.
    manager.pool_classes_by_scheme = POOL_CLASSES
    return manager


def storable(text: str) -> str:
    """`text` as PostgreSQL can store it: its text holds no NUL (nor does jsonb's text),
    and an endpoint's body or an error may contain anything."""
    return text.replace("\x00", "\ufffd")


def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    connect_timeout: float,
    read_timeout: float,
    excerpt_limit: int | None = None,
    policy: AddressPolicy | None = None,
    deadline: deadlines.Deadline | None = None,
    tls: client_tls.ClientTLS | None = None,
    proxy_url: str = "",
) -> HttpResult:
    """POST once, over by `deadline` (by default connect + read timeout from now)
    whatever the endpoint does; its holder may also cut it short (`Deadline.cut`).
    With a `policy`, the SSRF guard checks the scheme and every address the host
    resolves to before connecting (see `ssrf_transport`; through a `proxy_url`, before
    asking the proxy: `egress`). `tls`: the client certificate and CA bundle of
    https connections (`client_tls`). `excerpt_limit`: the bytes of the answer kept,
    by default `WEBHOOKS_RESPONSE_BODY_LIMIT_BYTES`."""
    if excerpt_limit is None:
        excerpt_limit = conf.get().response_body_limit
    return _send(
        "POST",
        url,
        body,
        headers,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        excerpt_limit=excerpt_limit,
        policy=policy,
        deadline=deadline,
        tls=tls,
        proxy_url=proxy_url,
    )


def request(
    method: str,
    url: str,
    headers: dict[str, str],
    *,
    connect_timeout: float,
    read_timeout: float,
    policy: AddressPolicy | None = None,
    deadline: deadlines.Deadline | None = None,
    tls: client_tls.ClientTLS | None = None,
    proxy_url: str = "",
) -> HttpResult:
    """Another method than POST, without a body (the CloudEvents handshake's OPTIONS),
    under the same guard and deadline as `post`; the result carries the response's
    headers."""
    return _send(
        method,
        url,
        None,
        headers,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        excerpt_limit=0,
        policy=policy,
        deadline=deadline,
        keep_headers=True,
        tls=tls,
        proxy_url=proxy_url,
    )


def _send(
    method: str,
    url: str,
    body: bytes | None,
    headers: dict[str, str],
    *,
    connect_timeout: float,
    read_timeout: float,
    excerpt_limit: int,
    policy: AddressPolicy | None,
    deadline: deadlines.Deadline | None,
    keep_headers: bool = False,
    tls: client_tls.ClientTLS | None = None,
    proxy_url: str = "",
) -> HttpResult:
    started = time.perf_counter()
    # From here: the target's name resolution below is part of the request.
    deadline = deadline or deadlines.after(connect_timeout + read_timeout)
    refusal = scheme_refusal(url, policy) if policy is not None else None
    if not refusal and policy is not None and proxy_url:
        refusal = egress_proxy.target_refusal(url, policy, deadline)
    if refusal:
        metrics.SSRF_REFUSALS.inc()
        duration_ms = (time.perf_counter() - started) * 1000
        return HttpResult(None, "", None, f"refused by the SSRF guard: {refusal}", duration_ms)
    all_headers = headers if _names_user_agent(headers) else {"User-Agent": USER_AGENT, **headers}
    _check_headers(all_headers)
    deadline = deadlines.arm(deadline)
    try:
        return _request(
            method,
            url,
            body,
            all_headers,
            connect_timeout,
            read_timeout,
            excerpt_limit,
            policy,
            deadline,
            started,
            keep_headers,
            tls,
            proxy_url,
        )
    finally:
        deadlines.finish(deadline)


def _names_user_agent(headers: dict[str, str]) -> bool:
    """Whether the caller sets its own User-Agent (in any case): it replaces ours."""
    return any(isinstance(name, str) and name.lower() == "user-agent" for name in headers)


def _check_headers(headers: dict[str, str]) -> None:
    """A value with a line break or leading whitespace is our error, not the endpoint's:
    `requests`' check raises (`InvalidHeader`) before anything is sent. It is asked only
    of a header that a plain scan cannot clear (every header, every request, is costly
    through it), so the rule and its message stay `requests`'."""
    for name, value in headers.items():
        if (
            type(name) is str
            and type(value) is str
            and name
            and not name[0].isspace()
            and (not value or not value[0].isspace())
            and ":" not in name
            and "\n" not in name
            and "\r" not in name
            and "\n" not in value
            and "\r" not in value
        ):
            continue
        check_header_validity((name, value))


@functools.lru_cache(maxsize=256)
def _timeout(connect: float, read: float) -> urllib3.Timeout:
    """One urllib3 Timeout per pair of values (endpoints share a few): building one
    validates both each time, and a pool only ever uses a clone of it."""
    return urllib3.Timeout(connect=connect, read=read)


@functools.lru_cache(maxsize=4096)
def _target(url: str) -> tuple[str, str, int | None, str]:
    """The URL's scheme, host, port and request target, as urllib3's pool manager parses
    them (endpoints send to the same few URLs again and again)."""
    parsed = parse_url(url)
    return parsed.scheme or "http", parsed.host or "", parsed.port, parsed.request_uri


def _open(
    manager: urllib3.PoolManager,
    method: str,
    url: str,
    body: bytes | None,
    headers: dict[str, str],
    connect_timeout: float,
    read_timeout: float,
    proxied: bool,
) -> "exchange.Exchange | _ProxiedExchange":
    """Send the request on a pooled connection of `manager`. Without a proxy, straight on
    a connection of the host's pool (`exchange`): the manager's own `request` would
    parse the URL, copy the headers and look for a redirect to follow on every request,
    and `urlopen` wrap it in objects of its own, none of which a delivery needs. Through
    a proxy, the proxy manager's path, which adds the proxy's headers, chooses the URL's
    form and opens the tunnel."""
    if proxied:
        # No redirect followed, no retry (the owner retries), the body read by the caller.
        return _ProxiedExchange(
            manager.request(
                method,
                url,
                body=body,
                headers=headers,
                timeout=_timeout(connect_timeout, read_timeout),
                redirect=False,
                retries=NO_RETRIES,
                preload_content=False,
            )
        )
    scheme, host, port, target = _target(url)
    key, context = _pool_key(manager, scheme, host, port)
    # The manager's own pool for the host, as `connection_from_host` finds it (and its
    # recently-used order kept), with its key made once per host rather than on every
    # request. (A copy of the context: a new pool's making takes keys out of it.)
    pool = manager.connection_from_pool_key(key, request_context=dict(context))
    return exchange.send(
        pool,
        method,
        target,
        body,
        headers,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
    )


class _ProxiedExchange:
    """A proxied request's urllib3 response, read and given back as an `Exchange` is."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response
        self.status = response.status

    def header(self, name: str) -> str | None:
        return self._response.headers.get(name)

    def headers(self) -> dict[str, str]:
        return dict(self._response.headers.items())

    def read_excerpt(self, read_limit: int, excerpt_limit: int) -> tuple[bytes, bool]:
        chunks: list[bytes] = []
        total = 0
        for chunk in self._response.stream(8192):
            chunks.append(chunk)
            total += len(chunk)
            if total > read_limit:
                return b"".join(chunks)[:excerpt_limit], False
        return b"".join(chunks)[:excerpt_limit], True

    def finish(self, reuse: bool) -> None:
        if not reuse:
            self._response.close()
        self._response.release_conn()


@functools.lru_cache(maxsize=4096)
def _pool_key(
    manager: urllib3.PoolManager, scheme: str, host: str, port: int | None
) -> tuple[Any, dict[str, Any]]:
    """The key `manager` files the host's pool under, and the context it makes the pool
    from: as `PoolManager.connection_from_host` builds them."""
    make_key = manager.key_fn_by_scheme.get(scheme)
    if make_key is None:
        raise URLSchemeUnknown(scheme)  # (as the manager itself says it)
    context = {
        **manager.connection_pool_kw,
        "scheme": scheme,
        "host": host,
        "port": port if port is not None else port_by_scheme.get(scheme, 80),
    }
    return make_key(context), context


def _request(
    method: str,
    url: str,
    body: bytes | None,
    all_headers: dict[str, str],
    connect_timeout: float,
    read_timeout: float,
    excerpt_limit: int,
    policy: AddressPolicy | None,
    deadline: deadlines.Deadline,
    started: float,
    keep_headers: bool = False,
    tls: client_tls.ClientTLS | None = None,
    proxy_url: str = "",
) -> HttpResult:
    try:
        # Through a proxy the target was checked above; the connection goes to the proxy.
        with address_policy(None if proxy_url else policy):
            response = _open(
                _manager(policy, tls, proxy_url),
                method,
                url,
                body,
                all_headers,
                connect_timeout,
                read_timeout,
                proxied=bool(proxy_url),
            )
    except (HTTPError, OSError) as exc:
        if _refused_address(exc):
            metrics.SSRF_REFUSALS.inc()
        return HttpResult(
            status_code=None,
            body_excerpt="",
            retry_after=None,
            error=storable(
                _cut_short(deadline, started) or f"{type(exc).__name__}: {_describe(exc)}"
            ),
            duration_ms=(time.perf_counter() - started) * 1000,
        )
    try:
        raw_excerpt, drained = response.read_excerpt(MAX_RESPONSE_READ_BYTES, excerpt_limit)
        excerpt = raw_excerpt.decode("utf-8", "replace")
        error = ""
    except (HTTPError, OSError) as exc:
        excerpt, drained = "", False
        error = _cut_short(deadline, started) or (
            f"reading the response failed: {type(exc).__name__}: {_describe(exc)}"
        )
    except BaseException:
        response.finish(reuse=False)
        raise
    finally:
        duration_ms = (time.perf_counter() - started) * 1000
    if deadline.disarm():
        # Cut short by its deadline, or aborted with its owner: never reused.
        drained = False
        error = error or _cut_short(deadline, started)
    # An unread body would poison the pooled connection: it is dropped instead.
    response.finish(reuse=drained)
    return HttpResult(
        status_code=response.status,
        body_excerpt=storable(excerpt),
        retry_after=response.header("Retry-After"),
        error=storable(error),
        duration_ms=duration_ms,
        headers=response.headers() if keep_headers else {},
    )


def _refused_address(exc: BaseException) -> bool:
    """Whether the SSRF guard refused the address (urllib3 may wrap its error)."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, AddressRefused):
            return True
        reason = getattr(seen, "reason", None)  # urllib3's wrappers; a str on some
        seen = reason if isinstance(reason, BaseException) else seen.__cause__ or seen.__context__
    return False


def _cut_short(deadline: deadlines.Deadline, started: float) -> str:
    if not deadline.fired:
        return ""
    took = time.perf_counter() - started
    return f"TimeoutError: the request was not over within its total deadline ({took:.1f} s)"


def _describe(exc: Exception) -> str:
    # urllib3 nests the reason; the innermost message is the useful one, and it never
    # holds our headers (signatures stay out of error texts).
    reason: BaseException = exc
    while isinstance(reason.__context__, Exception):
        reason = reason.__context__
    return str(reason)[:500]
