"""Signing outbound requests. Pure functions: no Django, no I/O.

Two schemes sign every request, one signature per active secret so that a receiver holding
either the old or the new secret verifies it during a rotation:

* ``X-Webhook-Signature: t=<ts>,v1=<hex>[,v1=<hex>]`` where each ``<hex>`` is
  HMAC-SHA256 keyed with the secret string exactly as the API showed it (``whsec_...``),
  over ``"<ts>.<raw body>"`` (article 000, the Stripe-style recipe).
* ``webhook-signature: v1,<base64> [v1,<base64>]`` per Standard Webhooks: HMAC-SHA256 keyed
  with the base64-decoded part of the secret after ``whsec_``, over
  ``"<msg id>.<ts>.<raw body>"``. The ``standardwebhooks`` and ``svix`` libraries verify it
  when given the secret as shown.
"""

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Sequence

SECRET_PREFIX = "whsec_"  # noqa: S105 (a prefix, not a secret)
SECRET_BYTES = 32


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
    return hmac.new(secret.encode("utf-8"), signed, hashlib.sha256).hexdigest()


def sign_standard(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(standard_webhooks_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signature_headers(
    secrets_: Sequence[str], *, msg_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """Both schemes' headers for one request, signed with every given secret."""
    if not secrets_:
        raise ValueError("at least one secret is needed to sign a request")
    v1 = ",".join(f"v1={sign_v1(s, timestamp, body)}" for s in secrets_)
    standard = " ".join(sign_standard(s, msg_id, timestamp, body) for s in secrets_)
    return {
        "X-Webhook-Signature": f"t={timestamp},{v1}",
        "webhook-signature": standard,
    }


def verify_v1(
    secret: str, header: str, body: bytes, *, now: int, tolerance_seconds: int = 300
) -> bool:
    """Verify an ``X-Webhook-Signature`` header; the receiver's side of ``sign_v1``."""
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
