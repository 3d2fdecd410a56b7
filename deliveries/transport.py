"""Outbound HTTP. Returns a result object instead of raising, so the caller records every
outcome the same way. No Django here.

One pooled `requests.Session` per thread keeps connections alive between requests to the
same receiver (sessions are not documented as thread-safe, and a worker may run threads).
"""

import threading
import time
from dataclasses import dataclass

import requests

from .ssrf import AddressPolicy, scheme_refusal
from .ssrf_transport import GuardedHTTPAdapter, address_policy

USER_AGENT = "django-reliable-webhooks/0.1"
# Read at most this much of a response: enough to drain typical bodies so the connection
# can be reused, never so much that a hostile receiver fills our memory.
MAX_RESPONSE_READ_BYTES = 64 * 1024

_local = threading.local()


@dataclass(frozen=True)
class HttpResult:
    status_code: int | None
    body_excerpt: str
    retry_after: str | None
    error: str
    duration_ms: float


def _session() -> requests.Session:
    session: requests.Session | None = getattr(_local, "session", None)
    if session is None:
        session = requests.Session()
        adapter = GuardedHTTPAdapter(pool_connections=32, pool_maxsize=8, max_retries=0)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        # Never pick up proxies or credentials from the environment or ~/.netrc.
        session.trust_env = False
        _local.session = session
    return session


def _storable(text: str) -> str:
    # PostgreSQL text cannot hold NUL; a receiver's body may contain anything.
    return text.replace("\x00", "\ufffd")


def _read_bounded(response: requests.Response, excerpt_limit: int) -> tuple[str, bool]:
    """The first `excerpt_limit` bytes as text, and whether the body was drained."""
    chunks: list[bytes] = []
    total = 0
    for chunk in response.iter_content(chunk_size=8192):
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_RESPONSE_READ_BYTES:
            return b"".join(chunks)[:excerpt_limit].decode("utf-8", "replace"), False
    return b"".join(chunks)[:excerpt_limit].decode("utf-8", "replace"), True


def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    connect_timeout: float,
    read_timeout: float,
    excerpt_limit: int = 2048,
    policy: AddressPolicy | None = None,
) -> HttpResult:
    """POST once. With a `policy`, the SSRF guard checks the scheme and every address the
    host resolves to before connecting (see `ssrf_transport`)."""
    started = time.perf_counter()
    refusal = scheme_refusal(url, policy) if policy is not None else None
    if refusal:
        return HttpResult(None, "", None, f"refused by the SSRF guard: {refusal}", 0.0)
    try:
        with address_policy(policy):
            response = _session().post(
                url,
                data=body,
                headers={"User-Agent": USER_AGENT, **headers},
                timeout=(connect_timeout, read_timeout),
                allow_redirects=False,
                stream=True,
            )
    except requests.RequestException as exc:
        return HttpResult(
            status_code=None,
            body_excerpt="",
            retry_after=None,
            error=_storable(f"{type(exc).__name__}: {_describe(exc)}"),
            duration_ms=(time.perf_counter() - started) * 1000,
        )
    try:
        excerpt, drained = _read_bounded(response, excerpt_limit)
        error = ""
    except requests.RequestException as exc:
        excerpt, drained = "", False
        error = f"reading the response failed: {type(exc).__name__}: {_describe(exc)}"
    finally:
        duration_ms = (time.perf_counter() - started) * 1000
    if not drained:
        # An unread body would poison the pooled connection; drop it instead.
        response.close()
    return HttpResult(
        status_code=response.status_code,
        body_excerpt=_storable(excerpt),
        retry_after=response.headers.get("Retry-After"),
        error=_storable(error),
        duration_ms=duration_ms,
    )


def _describe(exc: Exception) -> str:
    # requests nests the reason; the innermost message is the useful one, and it never
    # holds our headers (signatures stay out of error texts).
    reason = exc
    while reason.__context__ is not None and isinstance(reason.__context__, Exception):
        reason = reason.__context__
    return str(reason)[:500]
