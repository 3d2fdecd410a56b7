"""What every signature scheme has in common. Pure: no Django, no database, no I/O.

A scheme reads the signed parts of a request (timestamp, candidate signatures, message id),
computes the expected signature for one secret, and says where the event id and type live.
The pipeline (``verify`` below and ``receivers.views``) is the same for every scheme; a
scheme subclass declares only what differs.

Three hooks are for providers that need more, and their defaults change nothing:

* ``SignedParts.url``: the URL the provider called (set by ``verify``; the source's
  ``public_url`` behind a proxy). Schemes that sign it (Twilio, Square) say so with
  ``signs_url``.
* ``challenge``: an authenticated request that only asks the endpoint to prove itself
  (Slack's ``url_verification``) is answered with the returned ``Challenge``, never stored.
* ``envelopes``: one request carrying several events (SendGrid's batches) gives several
  envelopes, stored together; by default it is ``[envelope(...)]``.
"""

import hmac
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
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


class MalformedHeader(MalformedEnvelope):
    """A signature header is present but not in the provider's format (HTTP 400).

    Raised by ``signed_parts`` before anything is verified, so its message names the
    header and the expected format only: both are public, nothing about any secret is.
    """


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
    #: The URL the provider called, query string included ('' when the caller gave none).
    url: str = ""


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
    #: This event's own bytes when one request carries several (stored instead of the
    #: whole request body, so a batch of N events is not stored N times).
    raw_body: bytes | None = None


@dataclass(frozen=True)
class Challenge:
    """The answer to a provider's verification request (HTTP 200): nothing is stored."""

    body: bytes
    content_type: str = "application/json"


class Scheme:
    """One provider's way of signing and framing webhooks. Subclasses override hooks."""

    name: ClassVar[str]
    #: Headers that carry signatures or credentials: never stored with the inbox row.
    signature_headers: ClassVar[tuple[str, ...]] = ()
    #: Whether the provider signs a timestamp (so stale requests can be refused).
    has_timestamp: ClassVar[bool] = True
    #: Whether the provider signs the URL it called (then ``SignedParts.url`` matters, and a
    #: source behind a proxy needs its ``public_url``).
    signs_url: ClassVar[bool] = False

    # --- signature ------------------------------------------------------------------
    def signed_parts(self, headers: Headers) -> SignedParts:
        raise NotImplementedError

    def expected_signature(self, secret: str, parts: SignedParts, body: bytes) -> str | None:
        """The signature ``secret`` would give this request; None if it cannot sign."""
        raise NotImplementedError

    def signature_matches(self, secret: str, parts: SignedParts, body: bytes) -> bool:
        """Whether any candidate is ``secret``'s signature; compares with every candidate,
        each in constant time, without stopping at a match."""
        expected = self.expected_signature(secret, parts, body)
        if expected is None:
            return False
        hits = [hmac.compare_digest(expected.encode(), c.encode()) for c in parts.candidates]
        return any(hits)

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
    def challenge(self, headers: Headers, body: bytes, parts: SignedParts) -> Challenge | None:
        """The answer to an authenticated verification request, or None for an event."""
        return None

    def envelopes(self, headers: Headers, body: bytes, parts: SignedParts) -> list[Envelope]:
        """Every event of the request; at least one, or ``MalformedEnvelope``."""
        return [self.envelope(headers, body, parts)]

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
    url: str = "",
) -> Verified:
    """Check the signature against every secret, then the timestamp window.

    ``url`` is the URL the provider called, for the schemes that sign it. A malformed
    signature header raises ``MalformedHeader`` (a ``MalformedEnvelope``) before any secret
    is tried.

    Every secret is compared with every candidate in constant time and without stopping at
    the first match, so the time taken says nothing about which secret (if any) matched.
    The timestamp is checked after the signature: an unauthenticated caller learns nothing
    from the answer, and a signed-but-stale request is told apart as a replay in the logs.
    """
    parts = scheme.signed_parts(headers)
    if url:
        parts = replace(parts, url=url)
    matched: int | None = None
    for index, secret in enumerate(secrets):
        # An empty secret would be an empty HMAC key, which anyone can sign with.
        if secret and scheme.signature_matches(secret, parts, body) and matched is None:
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


def parse_json_array(body: bytes) -> list[tuple[dict[str, Any], bytes]]:
    """A JSON array of objects, each with its own exact bytes as sent, under the same
    rules as ``parse_json_object`` (no NaN, no infinity, depth, storable text)."""
    too_deep_error = f"body is nested more than {MAX_DEPTH} levels deep"
    try:
        text = body.decode("utf-8")
        data = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except (UnicodeDecodeError, ValueError):
        raise MalformedEnvelope("body is not valid JSON") from None
    except RecursionError:
        raise MalformedEnvelope(too_deep_error) from None
    if not isinstance(data, list):
        raise MalformedEnvelope("body must be a JSON array")
    if too_deep(data):
        raise MalformedEnvelope(too_deep_error)
    if "\\u" in text and not _storable_text(data):
        raise MalformedEnvelope("body contains \\u0000 or an unpaired surrogate")
    items = []
    for index, (item, raw) in enumerate(zip(data, _array_items(text), strict=True)):
        if not isinstance(item, dict):
            raise MalformedEnvelope(f"item {index} of the array is not a JSON object")
        items.append((item, raw.encode("utf-8")))
    return items


def _array_items(text: str) -> Iterator[str]:
    """The source text of each item of the JSON array ``text`` (already validated)."""
    decoder = json.JSONDecoder()
    position = _skip_space(text, 0) + 1  # past "["
    while True:
        position = _skip_space(text, position)
        if text[position] == "]":
            return
        _, end = decoder.raw_decode(text, position)
        yield text[position:end]
        position = _skip_space(text, end)
        if text[position] == ",":
            position += 1


def _skip_space(text: str, position: int) -> int:
    while text[position] in " \t\n\r":
        position += 1
    return position


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
