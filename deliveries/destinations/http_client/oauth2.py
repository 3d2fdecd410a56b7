"""OAuth2 client credentials (RFC 6749 §4.4) for endpoints that want a bearer token.

One token per endpoint and credentials, shared by every worker: it is kept in Redis
(beside the health counters, `conf.health().redis_url`), encrypted like every stored
secret, until shortly before its ``expires_in``. When it is missing, one worker fetches
(a short Redis lock) while the others wait for its answer, so a burst of deliveries makes
one request to the token server, not one each. A 401 from the endpoint names the token it
refused (`bearer_token(stale=...)`): only that token is dropped, so many 401s at once
still make one refresh.

The token request goes through the same transport as the delivery: the SSRF guard (the
token URL is checked when saved and again at connect), the egress proxy, the endpoint's
timeouts within the delivery's deadline. The client secret is sent with HTTP Basic
(§2.3.1, which every server must support). Neither it nor the token ever reaches a log,
an error text or an attempt record.
"""

import base64
import contextlib
import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol
from urllib.parse import quote, urlencode

import redis
from requests.utils import check_header_validity

from deliveries.destinations.http_client import transport
from webhooks_core.crypto import encryption
from webhooks_core.egress import deadlines, ssrf
from webhooks_core.egress.urlmask import masked_url

AUTH_TYPE = "oauth2_client_credentials"
KEY_PREFIX = "webhooks:oauth2:"
# A token is dropped this long before it expires (a tenth of its life for short ones), so
# a request never goes out with one that dies in flight.
EXPIRY_MARGIN_SECONDS = 60.0
# A token server that gives no expires_in: kept this long.
DEFAULT_LIFETIME_SECONDS = 300.0
WAIT_POLL_SECONDS = 0.05
# After a failed token request the others waiting get its error for this long instead of
# asking a server that is down, one after the other.
FAILURE_HOLD_SECONDS = 2.0
TOKEN_READ_LIMIT = 16 * 1024


class TokenError(Exception):
    """No token: the message says why and is safe to store and show (no secret in it)."""


@dataclass(frozen=True)
class ClientCredentials:
    token_url: str
    client_id: str
    client_secret: str
    scope: str = ""
    audience: str = ""

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for part in (self.token_url, self.client_id, self.client_secret, self.scope, self.audience):
            digest.update(part.encode())
            digest.update(b"\0")
        return digest.hexdigest()[:32]

    def __repr__(self) -> str:  # never the secret, not even in a traceback's locals
        return f"ClientCredentials(token_url={self.token_url!r}, client_id={self.client_id!r})"


class TokenStore(Protocol):
    def get(self, key: str) -> str | None: ...
    def put(self, key: str, token: str, ttl: float) -> None: ...
    def drop_if(self, key: str, token: str) -> None: ...
    def lock(self, key: str, owner: str, ttl: float) -> bool: ...
    def unlock(self, key: str, owner: str) -> None: ...
    def forget(self, prefix: str) -> None: ...


# Delete the key only while it still holds the given value (a token or a lock's owner).
_DELETE_IF_EQUAL = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class RedisTokenStore:
    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self._delete_if_equal = self.client.register_script(_DELETE_IF_EQUAL)

    def get(self, key: str) -> str | None:
        value = self.client.get(key)
        return value.decode() if isinstance(value, bytes) else value

    def put(self, key: str, token: str, ttl: float) -> None:
        self.client.set(key, token, px=max(int(ttl * 1000), 1))

    def drop_if(self, key: str, token: str) -> None:
        self._delete_if_equal(keys=[key], args=[token])

    def lock(self, key: str, owner: str, ttl: float) -> bool:
        return bool(self.client.set(key, owner, nx=True, px=max(int(ttl * 1000), 1)))

    def unlock(self, key: str, owner: str) -> None:
        self._delete_if_equal(keys=[key], args=[owner])

    def forget(self, prefix: str) -> None:
        # Our prefixes are made of an endpoint's UUID: no glob characters to escape.
        for key in self.client.scan_iter(match=f"{prefix}*", count=500):
            self.client.delete(key)


class LocalTokenStore:
    """The embedded mode's store (one process, no Redis)."""

    def __init__(self) -> None:
        self._values: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def _live(self, key: str) -> str | None:
        item = self._values.get(key)
        if item is None or item[1] <= time.monotonic():
            self._values.pop(key, None)
            return None
        return item[0]

    def get(self, key: str) -> str | None:
        with self._lock:
            return self._live(key)

    def put(self, key: str, token: str, ttl: float) -> None:
        with self._lock:
            self._values[key] = (token, time.monotonic() + ttl)

    def drop_if(self, key: str, token: str) -> None:
        with self._lock:
            if self._live(key) == token:
                del self._values[key]

    def lock(self, key: str, owner: str, ttl: float) -> bool:
        with self._lock:
            if self._live(key) is not None:
                return False
            self._values[key] = (owner, time.monotonic() + ttl)
            return True

    def unlock(self, key: str, owner: str) -> None:
        self.drop_if(key, owner)

    def forget(self, prefix: str) -> None:
        with self._lock:
            for key in [k for k in self._values if k.startswith(prefix)]:
                del self._values[key]


@lru_cache(maxsize=4)
def store_for(redis_url: str) -> TokenStore:
    return RedisTokenStore(redis_url) if redis_url else LocalTokenStore()


def forget_tokens(*, scope_keys: list[str], redis_url: str) -> None:
    """Drop every kept token (and its lock and failure marks) of these endpoints, whatever
    credentials they were fetched with: an erased endpoint's token is not kept until it
    expires."""
    store = store_for(redis_url)
    for scope_key in scope_keys:
        store.forget(f"{KEY_PREFIX}{scope_key}:")


def _lifetime(expires_in: Any) -> float:
    """How long to keep a token the server says lives `expires_in` seconds."""
    if isinstance(expires_in, str) and expires_in.strip().isdigit():
        expires_in = int(expires_in)
    if not isinstance(expires_in, int | float) or isinstance(expires_in, bool):
        expires_in = DEFAULT_LIFETIME_SECONDS
    return float(expires_in) - min(EXPIRY_MARGIN_SECONDS, float(expires_in) / 10)


def fetch_token(
    credentials: ClientCredentials,
    *,
    deadline: deadlines.Deadline,
    connect_timeout: float,
    read_timeout: float,
    policy: ssrf.AddressPolicy | None,
    proxy_url: str = "",
) -> tuple[str, float]:
    """Ask the token server once: (access token, seconds to keep it). Raises TokenError."""
    form: dict[str, str] = {"grant_type": "client_credentials"}
    if credentials.scope:
        form["scope"] = credentials.scope
    if credentials.audience:
        form["audience"] = credentials.audience
    basic = f"{quote(credentials.client_id, safe='')}:{quote(credentials.client_secret, safe='')}"
    headers = {
        "Authorization": "Basic " + base64.b64encode(basic.encode()).decode("ascii"),
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json",
    }
    if not deadline.rearm():
        raise TokenError("OAuth2 token: no time left within the attempt's deadline")
    result = transport.post(
        credentials.token_url,
        urlencode(form).encode(),
        headers,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        excerpt_limit=TOKEN_READ_LIMIT,
        policy=policy,
        deadline=deadline,
        proxy_url=proxy_url,
    )
    # Its query may carry a credential; what we store and log is masked.
    where = f"the token endpoint {masked_url(credentials.token_url)}"
    if result.status_code is None:
        raise TokenError(f"OAuth2 token: {where} did not answer: {result.error}")
    try:
        document = json.loads(result.body_excerpt)
    except ValueError:
        document = None
    if result.status_code != 200:
        reason = ""
        if isinstance(document, dict) and isinstance(document.get("error"), str):
            reason = f" ({document['error'][:100]})"
        raise TokenError(f"OAuth2 token: {where} answered HTTP {result.status_code}{reason}")
    if not isinstance(document, dict):
        raise TokenError(f"OAuth2 token: {where} answered 200 without a JSON object")
    token = document.get("access_token")
    if not isinstance(token, str) or not token:
        raise TokenError(f"OAuth2 token: {where} answered without an access_token")
    token_type = document.get("token_type", "bearer")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise TokenError(f"OAuth2 token: {where} gave a {str(token_type)[:40]!r} token, not bearer")
    try:
        # A token that cannot be a header value would fail the delivery later, obscurely.
        check_header_validity(("Authorization", f"Bearer {token}"))
    except ValueError:
        raise TokenError(f"OAuth2 token: {where} gave a token that is not a header value") from None
    return token, _lifetime(document.get("expires_in"))


def bearer_token(
    credentials: ClientCredentials,
    *,
    scope_key: str,
    deadline: deadlines.Deadline,
    connect_timeout: float,
    read_timeout: float,
    policy: ssrf.AddressPolicy | None,
    redis_url: str,
    proxy_url: str = "",
    stale: str | None = None,
) -> str:
    """The shared token for these credentials (``scope_key``: the endpoint), fetched when
    none is kept; ``stale``: a token the endpoint refused, to be replaced (once, by
    whichever worker gets there first). Raises TokenError."""
    store = store_for(redis_url)
    key = f"{KEY_PREFIX}{scope_key}:{credentials.fingerprint}"
    lock_key = f"{key}:lock"
    failed_key = f"{key}:failed"
    try:
        if stale is not None:
            _drop_token(store, key, stale)
        owner = uuid.uuid4().hex
        while True:
            kept = _read(store, key)
            if kept is not None and kept != stale:
                return kept
            left = deadline.at - time.monotonic()
            if left <= 0:
                raise TokenError(
                    "OAuth2 token: another worker's token request did not finish within "
                    "the attempt's deadline"
                )
            failed = store.get(failed_key)
            if failed is not None:
                # Its last request just failed: the same answer, not another request each.
                raise TokenError(failed)
            if store.lock(lock_key, owner, left + 1.0):
                try:
                    kept = _read(store, key)
                    if kept is not None and kept != stale:
                        return kept
                    try:
                        token, lifetime = fetch_token(
                            credentials,
                            deadline=deadline,
                            connect_timeout=connect_timeout,
                            read_timeout=read_timeout,
                            policy=policy,
                            proxy_url=proxy_url,
                        )
                    except TokenError as exc:
                        store.put(failed_key, str(exc), FAILURE_HOLD_SECONDS)
                        raise
                    if lifetime > 0:
                        store.put(key, encryption.encrypt(token), lifetime)
                    return token
                finally:
                    with contextlib.suppress(redis.RedisError):
                        store.unlock(lock_key, owner)
            time.sleep(WAIT_POLL_SECONDS)
    except redis.RedisError as exc:
        raise TokenError(
            f"OAuth2 token: the token cache is unavailable: {type(exc).__name__}"
        ) from None


def _read(store: TokenStore, key: str) -> str | None:
    value = store.get(key)
    if value is None:
        return None
    try:
        return encryption.decrypt(value)
    except encryption.SecretDecryptionError:
        return None  # encrypted with a key no longer configured: fetch a new one


def _drop_token(store: TokenStore, key: str, stale: str) -> None:
    # Fernet tokens differ on every encryption: compare the plaintext, then delete that
    # very ciphertext (another worker's fresh token stays).
    value = store.get(key)
    if value is None:
        return
    try:
        if encryption.decrypt(value) == stale:
            store.drop_if(key, value)
    except encryption.SecretDecryptionError:
        store.drop_if(key, value)
