"""What every signature scheme has in common. Pure: no Django, no database, no I/O.

A scheme reads the signed parts of a request (timestamp, candidate signatures, message id),
computes the expected signature for one secret, and says where the event id and type live.
The pipeline (``verify`` below and ``receivers.views``) is the same for every scheme; a
scheme subclass declares only what differs.

Three hooks are for providers that need more, and their defaults change nothing:

* ``SignedParts.url``: the URL the provider called (set by ``screen``; the source's
  ``public_url`` behind a proxy). Schemes that sign it (Twilio, Square) say so with
  ``signs_url``.
* ``challenge``: an authenticated request that only asks the endpoint to prove itself
  (Slack's ``url_verification``) is answered with the returned ``Challenge``, never stored.
* ``envelopes``: one request carrying several events (SendGrid's batches) gives several
  envelopes, stored together; by default it is ``[envelope(...)]``.

A host adds its own schemes with the ``RECEIVERS_SCHEMES`` setting (``receivers.schemes.
registry``); docs/receiving/providers.md is the guide.
"""

import hmac
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, ClassVar

from receivers.timestamps import within_window
from webhooks_core.jsonchecks.depth import MAX_DEPTH, too_deep
from webhooks_core.jsonchecks.text import unstorable_text

MAX_EVENT_ID_LENGTH = 255
MAX_EVENT_TYPE_LENGTH = 200
#: Signatures one request may carry, whatever the scheme. A sender signs once per secret it
#: holds (two or three during a rotation; our sender with ``v1,v1a`` and a rotation, four),
#: so more is refused before any key or body is touched: each candidate may cost a
#: verification over the whole body.
MAX_SIGNATURES = 8
#: The prefix of a Standard Webhooks ed25519 public key (``webhooks_core.crypto.signing``). Anyone
#: may read a public key, so a scheme that keys an HMAC with its secret must never take one.
PUBLIC_KEY_PREFIX = "whpk_"


class VerificationError(Exception):
    """The request is not authentic. The message is for logs only, never for the caller."""


class SignatureMismatch(VerificationError):
    """No signature in the request matches any active secret (or none was sent)."""


class TimestampOutOfWindow(VerificationError):
    """The signature is valid but its timestamp is outside the tolerance: a replay."""


class MalformedSignature(SignatureMismatch):
    """The signature headers are not what the scheme sends (refused before any cryptography)."""


class TooManySignatures(VerificationError):
    """More than `MAX_SIGNATURES` candidates: refused before any cryptography (HTTP 400)."""


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
    #: Why the signature headers are not well formed ('' when they are): the request is
    #: refused before any cryptography, as a wrong signature is (401). A scheme whose
    #: provider documents its format may raise `MalformedHeader` instead (400, naming it).
    malformed: str = ""
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
    #: Whether a secret may be a ``whpk_`` public key (an asymmetric scheme verifies with
    #: it). False for every HMAC scheme: an HMAC keyed with a published key is a signature
    #: anyone can make. A scheme that sets it True must verify public keys asymmetrically.
    accepts_public_keys: ClassVar[bool] = False
    #: What a source of this scheme takes, named when a secret is refused.
    asks_for: ClassVar[str] = "the signing secret the provider shows"
    #: How the admin and the API's documentation name the scheme (its ``name`` if empty).
    label: ClassVar[str] = ""
    #: Whether a source may be created (or rotated) without a secret: one is generated and
    #: shown once, for the sender to configure. Only for senders that take a secret from us;
    #: a provider that issues its own (Stripe, GitHub, ...) would never sign with ours.
    generates_secrets: ClassVar[bool] = False

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
        instead of turning every later request into a silent 401. A subclass adds its own
        rules after ``super().secret_problem(secret)``; the services check secrets through
        `secret_refusal`, which applies the rules every scheme shares even to a subclass
        that forgets to call ``super()``.
        """
        return common_secret_problem(self, secret)

    def signed_material(self, parts: SignedParts, body: bytes) -> bytes:
        """What the signature covers, as one byte string: for a scheme that signs no
        timestamp, its SHA-256 deduplicates the inbox (a replay under another unsigned id
        or type is a duplicate). The body by default; a scheme that signs more (the URL)
        or a canonical form of the body (sorted form fields) says so."""
        return body

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

    # --- reconciliation ---------------------------------------------------------------
    def reconcile(self, source: Any) -> Any:
        """Ask the provider's API about ``source``'s stuck objects and apply its answers;
        returns a ``receivers.reconciliation.ReconcileResult``.

        Override it when the provider has such an API (beat then calls it for every
        enabled source of this scheme with an ``api_base_url``, in a worker; this is the
        one hook that may use the database and the network). Not overridden, the function
        registered for this scheme's name with ``@receivers.reconciliation.reconciler``
        runs, if there is one (a host's reconciler of its own domain).
        """
        raise NotImplementedError

    @classmethod
    def reconciles(cls) -> bool:
        """Whether the scheme reconciles by itself (overrides `reconcile`)."""
        return cls.reconcile is not Scheme.reconcile

    @property
    def title(self) -> str:
        return self.label or self.name


def is_public_key(secret: str) -> bool:
    return secret.startswith(PUBLIC_KEY_PREFIX)


def common_secret_problem(scheme: Scheme, secret: str) -> str | None:
    """The rules every scheme's secrets follow, today's schemes and those added later."""
    if not secret:
        return "the secret is empty"
    if any(ord(char) < 32 or ord(char) == 127 for char in secret):
        return "the secret contains control characters (a line break pasted with it?)"
    try:
        secret.encode("utf-8")
    except UnicodeEncodeError:
        return "the secret is not valid Unicode text"
    if is_public_key(secret) and not scheme.accepts_public_keys:
        # One rule for every scheme that does not verify our public keys asymmetrically:
        # the HMAC schemes, and SendGrid's, whose key is SendGrid's own (ECDSA, not ours).
        return (
            f"that is a '{PUBLIC_KEY_PREFIX}' public key, which the {scheme.name} scheme never "
            "verifies with: anyone can read a public key, so an HMAC keyed by one is a "
            f"signature anyone could forge; give the source {scheme.asks_for}"
        )
    return None


def secret_refusal(scheme: Scheme, secret: str) -> str | None:
    """Why ``secret`` cannot be one of ``scheme``'s secrets (None if it can): the shared
    rules first, then the scheme's own. Every write of a secret goes through this."""
    return common_secret_problem(scheme, secret) or scheme.secret_problem(secret)


@dataclass(frozen=True)
class Verified:
    parts: SignedParts
    secret_index: int


def screen(
    scheme: Scheme, headers: Headers, *, now: float, tolerance_seconds: int, url: str = ""
) -> SignedParts:
    """The checks that need neither a key nor the body, made before any cryptography.

    Too many signatures (`TooManySignatures`), none at all, no timestamp or headers the
    scheme never sends (`MalformedSignature`), a stale timestamp (`TimestampOutOfWindow`):
    each costs no more than reading the headers, so a flood of forged requests cannot make
    the receiver verify anything. Every one of these but the first is answered exactly as
    a wrong signature is, so a caller learns nothing it did not send itself. A scheme whose
    ``signed_parts`` raises `MalformedHeader` (a header present but not in the provider's
    documented format) is answered 400 naming the header, still before any cryptography.
    ``url`` (the URL the provider called) is kept in the parts for the schemes that sign it.
    """
    parts = scheme.signed_parts(headers)
    if url:
        parts = replace(parts, url=url)
    if len(parts.candidates) > MAX_SIGNATURES:
        raise TooManySignatures(
            f"{scheme.name}: {len(parts.candidates)} signatures (at most {MAX_SIGNATURES})"
        )
    if parts.malformed:
        raise MalformedSignature(f"{scheme.name}: {parts.malformed}")
    if not parts.candidates:
        raise MalformedSignature(f"{scheme.name}: no signature")
    if scheme.has_timestamp and parts.timestamp is None:
        raise MalformedSignature(f"{scheme.name}: no timestamp")
    if scheme.has_timestamp and not within_window(parts.timestamp or 0, now, tolerance_seconds):
        raise TimestampOutOfWindow(f"{scheme.name}: timestamp outside {tolerance_seconds}s")
    return parts


def verify(
    scheme: Scheme,
    headers: Headers,
    body: bytes,
    secrets: Sequence[str],
    *,
    now: float,
    tolerance_seconds: int,
    url: str = "",
    parts: SignedParts | None = None,
) -> Verified:
    """`screen` the headers (unless ``parts`` says it was done), then check the signature
    against every secret.

    ``url`` is the URL the provider called, for the schemes that sign it. A signature
    header not in the provider's format raises ``MalformedHeader`` (a
    ``MalformedEnvelope``) from `screen`, before any secret is tried.

    The timestamp window comes first: a stale or forged-stale request costs no
    cryptography (both answer 401, so the order tells the caller nothing). Every secret is
    compared with every candidate in constant time and without stopping at the first
    match, so the time taken says nothing about which secret (if any) matched. A public
    key held by a scheme that keys an HMAC with its secrets never verifies anything, even
    if it was stored before `common_secret_problem` refused it.
    """
    if parts is None:
        parts = screen(scheme, headers, now=now, tolerance_seconds=tolerance_seconds, url=url)
    elif url and not parts.url:
        parts = replace(parts, url=url)
    matched: int | None = None
    for index, secret in enumerate(secrets):
        # An empty secret would be an empty HMAC key, which anyone can sign with.
        if not secret or (is_public_key(secret) and not scheme.accepts_public_keys):
            continue
        if scheme.signature_matches(secret, parts, body) and matched is None:
            matched = index
    if matched is None:
        raise SignatureMismatch(f"{scheme.name}: no signature matches an active secret")
    return Verified(parts=parts, secret_index=matched)


#: Standard Webhooks' signature list: ``v1,<b64> v1a,<b64> ...``. A proxy or server that
#: joins repeated header lines (gunicorn does, with a comma) keeps the pairs readable
#: when they are split on spaces and commas alike (base64 has neither).
_LIST_SEPARATORS = re.compile(r"[\s,]+")


def split_signature_list(header: str) -> tuple[list[str], str]:
    """``"v1,a v1a,b"`` (or ``"v1,a,v1a,b"``) -> (``["v1,a", "v1a,b"]``, problem or '')."""
    pieces = [piece for piece in _LIST_SEPARATORS.split(header.strip()) if piece]
    if len(pieces) % 2:
        return [], "the signature list is not pairs of version and signature"
    pairs = zip(pieces[::2], pieces[1::2], strict=True)
    return [f"{version},{value}" for version, value in pairs], ""


# --- small parsing helpers shared by the schemes -----------------------------------------


def _parsed_json(body: bytes | str, expected: type[dict[str, Any]] | type[list[Any]]) -> Any:
    """The JSON document in ``body``, of the type expected, under the rules every scheme's
    body follows: no NaN, no infinity, at most ``MAX_DEPTH`` levels, storable text."""
    too_deep_error = f"body is nested more than {MAX_DEPTH} levels deep"
    try:
        data = json.loads(body, parse_constant=_refuse_constant, parse_float=_finite_float)
    except (UnicodeDecodeError, ValueError):
        raise MalformedEnvelope("body is not valid JSON") from None
    except RecursionError:
        raise MalformedEnvelope(too_deep_error) from None
    if not isinstance(data, expected):
        kind = "object" if expected is dict else "array"
        raise MalformedEnvelope(f"body must be a JSON {kind}")
    if too_deep(data):
        raise MalformedEnvelope(too_deep_error)
    # Only an escape can smuggle these in; most bodies have none and skip the check.
    escaped = b"\\u" in body if isinstance(body, bytes) else "\\u" in body
    if escaped and not _storable_text(data):
        raise MalformedEnvelope("body contains \\u0000 or an unpaired surrogate")
    return data


def parse_json_object(body: bytes) -> dict[str, Any]:
    data: dict[str, Any] = _parsed_json(body, dict)
    return data


def parse_json_array(body: bytes) -> list[tuple[dict[str, Any], bytes]]:
    """A JSON array of objects, each with its own exact bytes as sent, under the same
    rules as ``parse_json_object`` (no NaN, no infinity, depth, storable text)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedEnvelope("body is not valid JSON") from None
    data: list[Any] = _parsed_json(text, list)
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
    return unstorable_text(value) is None


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
