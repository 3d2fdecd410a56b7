"""Signing outbound requests. Pure functions: no Django, no I/O.

Two schemes sign every request, one signature per active secret so that an endpoint holding
either the old or the new secret verifies it during a rotation:

* ``X-Webhook-Signature: t=<ts>,v1=<hex>[,v1=<hex>]`` where each ``<hex>`` is
  HMAC-SHA256 keyed with the secret string exactly as the API showed it (``whsec_...``),
  over ``"<ts>.<raw body>"`` (the recipe Stripe made common).
* ``webhook-signature: v1,<base64> [v1,<base64>]`` per Standard Webhooks: HMAC-SHA256 keyed
  with the base64-decoded part of the secret after ``whsec_``, over
  ``"<msg id>.<ts>.<raw body>"``. The ``standardwebhooks`` and ``svix`` libraries verify it
  when given the secret as shown.

An endpoint whose ``signature_scheme`` asks for it also gets asymmetric ``v1a`` entries in
``webhook-signature`` (Standard Webhooks' ed25519 scheme, as Svix does it): the signature
over the same ``"<msg id>.<ts>.<raw body>"``, one per unexpired key pair. The private key
is ``whsk_`` + base64(32-byte seed + 32-byte public key), the public key ``whpk_`` +
base64(32-byte public key). ``X-Webhook-Signature`` stays HMAC whatever the scheme.
"""

import base64
import binascii
import hmac
import secrets
from collections.abc import Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

SECRET_PREFIX = "whsec_"  # noqa: S105 (a prefix, not a secret)
SECRET_BYTES = 32
PRIVATE_KEY_PREFIX = "whsk_"
PUBLIC_KEY_PREFIX = "whpk_"
ED25519_KEY_BYTES = 32

#: Values of an endpoint's ``signature_scheme`` and what each puts in ``webhook-signature``.
SCHEME_V1 = "v1"
SCHEME_V1A = "v1a"
SCHEME_BOTH = "v1,v1a"
SCHEMES = (SCHEME_V1, SCHEME_V1A, SCHEME_BOTH)


class InvalidKey(ValueError):
    """A ``whsk_``/``whpk_`` key that is not what its prefix promises (never echoes it)."""


def generate_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def standard_webhooks_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret; ValueError if it is not one.

    The padding is optional, as in the ``standardwebhooks`` and ``svix`` libraries (some
    providers show their secrets without it); any other character outside base64 is an
    error instead of being skipped, and an empty key is never returned.
    """
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except binascii.Error:
        raise ValueError("the secret is not 'whsec_' followed by base64") from None
    if not key:
        raise ValueError("the secret is empty")
    return key


def sign_v1(secret: str, timestamp: int, body: bytes) -> str:
    if not secret:
        # An empty HMAC key is a signature anyone can compute.
        raise ValueError("the secret is empty")
    signed = str(timestamp).encode("ascii") + b"." + body
    # `hmac.digest`: the one-shot C path, no HMAC object per signature.
    return hmac.digest(secret.encode("utf-8"), signed, "sha256").hex()


def sign_standard(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.digest(standard_webhooks_key(secret), signed, "sha256")
    return "v1," + base64.b64encode(digest).decode("ascii")


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _decode(value: str, prefix: str, lengths: tuple[int, ...]) -> bytes:
    if not value.startswith(prefix):
        raise InvalidKey(f"a key of this kind starts with {prefix!r}")
    try:
        raw = base64.b64decode(value.removeprefix(prefix), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidKey(f"a {prefix!r} key is base64 after its prefix") from None
    if len(raw) not in lengths:
        raise InvalidKey(f"a {prefix!r} key holds {' or '.join(map(str, lengths))} bytes")
    return raw


def _private_key(private_key: str) -> Ed25519PrivateKey:
    # Svix's form is seed + public key; a bare 32-byte seed is accepted too.
    raw = _decode(private_key, PRIVATE_KEY_PREFIX, (ED25519_KEY_BYTES, 2 * ED25519_KEY_BYTES))
    key = Ed25519PrivateKey.from_private_bytes(raw[:ED25519_KEY_BYTES])
    if len(raw) > ED25519_KEY_BYTES and raw[ED25519_KEY_BYTES:] != _public_bytes(key):
        raise InvalidKey("the public half of this 'whsk_' key does not match its seed")
    return key


def _public_bytes(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def generate_key_pair() -> tuple[str, str]:
    """A new ed25519 key pair: (``whsk_…`` private key, ``whpk_…`` public key)."""
    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes_raw()
    public = _public_bytes(key)
    return PRIVATE_KEY_PREFIX + _b64(seed + public), PUBLIC_KEY_PREFIX + _b64(public)


def public_key_of(private_key: str) -> str:
    """The ``whpk_`` public key of a ``whsk_`` private key."""
    return PUBLIC_KEY_PREFIX + _b64(_public_bytes(_private_key(private_key)))


def check_public_key(public_key: str) -> None:
    """Raise `InvalidKey` unless ``public_key`` is a ``whpk_`` ed25519 public key."""
    _decode(public_key, PUBLIC_KEY_PREFIX, (ED25519_KEY_BYTES,))


def sign_v1a(private_key: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """A Standard Webhooks ``v1a,<base64 ed25519 signature>`` entry."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1a," + _b64(_private_key(private_key).sign(signed))


def standard_signed_content(msg_id: str, timestamp: int, body: bytes) -> bytes:
    """What Standard Webhooks signs, ``v1`` and ``v1a`` alike: ``"<id>.<ts>.<body>"``."""
    return f"{msg_id}.{timestamp}.".encode() + body


def verify_v1a(public_key: str, msg_id: str, timestamp: int, body: bytes, entry: str) -> bool:
    """Whether one ``v1a,<base64>`` entry is ``public_key``'s signature of the message.

    Ed25519 verification takes the same time whatever the signature's bytes, so there is
    no early-exit comparison to guard against here.
    """
    return verify_v1a_message(public_key, standard_signed_content(msg_id, timestamp, body), entry)


def verify_v1a_message(public_key: str, message: bytes, entry: str) -> bool:
    """`verify_v1a` over an already built `standard_signed_content` (built once for many
    entries). An entry that is not 64 bytes of base64 costs no verification."""
    version, _, encoded = entry.partition(",")
    if version != "v1a":
        return False
    try:
        signature = base64.b64decode(encoded, validate=True)
        if len(signature) != 2 * ED25519_KEY_BYTES:
            return False
        raw = _decode(public_key, PUBLIC_KEY_PREFIX, (ED25519_KEY_BYTES,))
        Ed25519PublicKey.from_public_bytes(raw).verify(signature, message)
    except (binascii.Error, ValueError, InvalidSignature):
        return False
    return True


def signature_headers(
    secrets_: Sequence[str],
    *,
    msg_id: str,
    timestamp: int,
    body: bytes,
    scheme: str = SCHEME_V1,
    private_keys: Sequence[str] = (),
) -> dict[str, str]:
    """The signature headers for one request, signed with every given secret and key.

    ``scheme`` says what goes in ``webhook-signature``: HMAC ``v1`` entries, ed25519
    ``v1a`` entries, or both (``"v1,v1a"``); ``X-Webhook-Signature`` is always HMAC.
    """
    if not secrets_:
        raise ValueError("at least one secret is needed to sign a request")
    if scheme not in SCHEMES:
        raise ValueError(f"unknown signature scheme {scheme!r}")
    wants_v1a = scheme in (SCHEME_V1A, SCHEME_BOTH)
    if wants_v1a and not private_keys:
        raise ValueError("a v1a signature needs at least one private key")
    v1 = ",".join(f"v1={sign_v1(s, timestamp, body)}" for s in secrets_)
    entries: list[str] = []
    if scheme in (SCHEME_V1, SCHEME_BOTH):
        entries += [sign_standard(s, msg_id, timestamp, body) for s in secrets_]
    if wants_v1a:
        entries += [sign_v1a(k, msg_id, timestamp, body) for k in private_keys]
    return {
        "X-Webhook-Signature": f"t={timestamp},{v1}",
        "webhook-signature": " ".join(entries),
    }


def verify_v1(
    secret: str, header: str, body: bytes, *, now: int, tolerance_seconds: int = 300
) -> bool:
    """Verify an ``X-Webhook-Signature`` header; the verifying side of ``sign_v1``."""
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        # ASCII digits only: str.isdigit() also accepts characters int() refuses ("²").
        if key == "t" and value.isascii() and value.isdigit():
            timestamp = int(value)
        elif key == "v1":
            candidates.append(value)
    if timestamp is None or abs(now - timestamp) > tolerance_seconds:
        return False
    expected = sign_v1(secret, timestamp, body).encode("ascii")
    # Compare against every candidate without stopping early, in constant time each. As
    # bytes: compare_digest raises TypeError on str holding non-ASCII characters.
    matches = [
        hmac.compare_digest(expected, candidate.encode("utf-8", "replace"))
        for candidate in candidates
    ]
    return any(matches)
