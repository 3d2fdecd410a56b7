"""What every signature scheme has in common. Pure: no Django, no database, no I/O.

A scheme reads the signed parts of a request (timestamp, candidate signatures, message id),
computes the expected signature for one secret, and says where the event id and type live.
The pipeline (``verify`` below and ``receivers.views``) is the same for every scheme; a
scheme subclass declares only what differs.
"""

import hmac
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from deliveries.jsondepth import MAX_DEPTH, too_deep

from ..timestamps import within_window

MAX_EVENT_ID_LENGTH = 255
MAX_EVENT_TYPE_LENGTH = 200


class VerificationError(Exception):
    """The request is not authentic. The message is for logs only, never for the caller."""


class SignatureMismatch(VerificationError):
    """No signature in the request matches any active secret (or none was sent)."""


class TimestampOutOfWindow(VerificationError):
    """The signature is valid but its timestamp is outside the tolerance: a replay."""


class MalformedEnvelope(ValueError):
    """The authenticated body is not an event we can store (HTTP 400, message shown)."""


class Headers:
    """Case-insensitive, read-only view of request headers."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = {name.lower(): value for name, value in headers.items()}

    def get(self, name: str, default: str = "") -> str:
        return self._headers.get(name.lower(), default)

    def first(self, *names: str) -> str:
        for name in names:
            value = self.get(name)
            if value:
                return value
        return ""


@dataclass(frozen=True)
class SignedParts:
    """What a request says about its own signature."""

    candidates: Sequence[str]
    timestamp: int | None = None
    msg_id: str = ""


@dataclass(frozen=True)
class Envelope:
    """The fields the inbox needs, taken from an authenticated request."""

    event_id: str
    type: str
    payload: Any
    provider_timestamp: datetime | None = None
    account: str = ""
    mode: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


class Scheme:
    """One provider's way of signing and framing webhooks. Subclasses override hooks."""

    name: ClassVar[str]
    #: Headers that carry signatures or credentials: never stored with the inbox row.
    signature_headers: ClassVar[tuple[str, ...]] = ()
    #: Whether the provider signs a timestamp (so stale requests can be refused).
    has_timestamp: ClassVar[bool] = True

    # --- signature ------------------------------------------------------------------
    def signed_parts(self, headers: Headers) -> SignedParts:
        raise NotImplementedError

    def expected_signature(self, secret: str, parts: SignedParts, body: bytes) -> str | None:
        """The signature ``secret`` would give this request; None if it cannot sign."""
        raise NotImplementedError

    def secret_problem(self, secret: str) -> str | None:
        """Why ``secret`` could never verify a request of this scheme (None if it can).

        Checked when a secret is configured, so that a mistyped secret is refused at once
        instead of turning every later request into a silent 401.
        """
        if not secret:
            return "the secret is empty"
        if any(ord(char) < 32 or ord(char) == 127 for char in secret):
            return "the secret contains control characters (a line break pasted with it?)"
        try:
            secret.encode("utf-8")
        except UnicodeEncodeError:
            return "the secret is not valid Unicode text"
        return None

    # --- envelope -------------------------------------------------------------------
    def envelope(self, headers: Headers, body: bytes, parts: SignedParts) -> Envelope:
        data = parse_json_object(body)
        return Envelope(
            event_id=require_text(data.get("id"), "id", MAX_EVENT_ID_LENGTH),
            type=require_text(data.get("type"), "type", MAX_EVENT_TYPE_LENGTH),
            payload=data,
            provider_timestamp=self.provider_timestamp(data, parts),
        )

    def provider_timestamp(self, data: Mapping[str, Any], parts: SignedParts) -> datetime | None:
        return from_unix(parts.timestamp)


@dataclass(frozen=True)
class Verified:
    parts: SignedParts
    secret_index: int


def verify(
    scheme: Scheme,
    headers: Headers,
    body: bytes,
    secrets: Sequence[str],
    *,
    now: float,
    tolerance_seconds: int,
) -> Verified:
    """Check the signature against every secret, then the timestamp window.

    Every secret is compared with every candidate in constant time and without stopping at
    the first match, so the time taken says nothing about which secret (if any) matched.
    The timestamp is checked after the signature: an unauthenticated caller learns nothing
    from the answer, and a signed-but-stale request is told apart as a replay in the logs.
    """
    parts = scheme.signed_parts(headers)
    matched: int | None = None
    for index, secret in enumerate(secrets):
        # An empty secret would be an empty HMAC key, which anyone can sign with.
        expected = scheme.expected_signature(secret, parts, body) if secret else None
        if expected is None:
            continue
        hits = [hmac.compare_digest(expected.encode(), c.encode()) for c in parts.candidates]
        if any(hits) and matched is None:
            matched = index
    if matched is None:
        raise SignatureMismatch(f"{scheme.name}: no signature matches an active secret")
    if scheme.has_timestamp and (
        parts.timestamp is None or not within_window(parts.timestamp, now, tolerance_seconds)
    ):
        raise TimestampOutOfWindow(f"{scheme.name}: timestamp outside {tolerance_seconds}s")
    return Verified(parts=parts, secret_index=matched)


# --- small parsing helpers shared by the schemes -----------------------------------------


def parse_json_object(body: bytes) -> dict[str, Any]:
    too_deep_error = f"body is nested more than {MAX_DEPTH} levels deep"
    try:
        data = json.loads(body, parse_constant=_refuse_constant, parse_float=_finite_float)
    except (UnicodeDecodeError, ValueError):
        raise MalformedEnvelope("body is not valid JSON") from None
    except RecursionError:
        raise MalformedEnvelope(too_deep_error) from None
    if not isinstance(data, dict):
        raise MalformedEnvelope("body must be a JSON object")
    if too_deep(data):
        raise MalformedEnvelope(too_deep_error)
    # Only an escape can smuggle these in; most bodies have none and skip the check.
    if b"\\u" in body and not _storable_text(data):
        raise MalformedEnvelope("body contains \\u0000 or an unpaired surrogate")
    return data


def _refuse_constant(name: str) -> None:
    # Python accepts NaN and Infinity, JSON (and PostgreSQL's jsonb) does not.
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 would be stored as Infinity
        raise ValueError(f"{text} is out of range")
    return value


def _storable_text(value: Any) -> bool:
    """Whether PostgreSQL can store every string in ``value`` (no NUL, valid UTF-8)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")  # an unpaired surrogate does not encode
        except UnicodeEncodeError:
            return False
        return "\x00" not in value
    if isinstance(value, dict):
        return all(_storable_text(k) and _storable_text(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_storable_text(item) for item in value)
    return True


def require_text(value: Any, name: str, max_length: int) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise MalformedEnvelope(f"missing or empty {name!r}")
    if len(value) > max_length:
        raise MalformedEnvelope(f"{name!r} is longer than {max_length} characters")
    return value


def parse_int(value: str) -> int | None:
    value = value.strip()
    # ASCII digits only: str.isdigit() also accepts characters int() refuses ("²").
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 12 else None


def from_unix(value: Any) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def from_iso(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
