"""What the providers that sign with an HMAC of a shared secret have in common.

The secret is the text the provider shows (its UTF-8 bytes key the HMAC), so any text
will do, except an asymmetric key of ours: a ``whpk_`` public key is public, and an HMAC
keyed with it proves nothing (refused for every scheme by ``base.common_secret_problem``),
and a ``whsk_`` private key belongs to the sender alone (refused here: no provider shows
one).
"""

import base64
import binascii
import hashlib
import hmac

from receivers.schemes.base import MalformedHeader, Scheme
from webhooks_core.crypto import signing

SHA256_BYTES = 32
SHA1_BYTES = 20


class HmacScheme(Scheme):
    """A scheme keyed with the provider's shared secret, as given."""

    def secret_problem(self, secret: str) -> str | None:
        # The shared rules first, the whpk_ public key among them (one rule, in base).
        problem = super().secret_problem(secret)
        if problem:
            return problem
        if secret.startswith(signing.PRIVATE_KEY_PREFIX):
            return (
                f"that is a 'whsk_' private key: a {self.name} source needs the signing "
                "secret the provider shows"
            )
        return None


def hmac_sha256(secret: str, message: bytes) -> bytes:
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).digest()


def base64_digest(header: str, value: str, length: int) -> str:
    """``value`` if it is the standard base64 of ``length`` bytes; else ``MalformedHeader``.

    The candidate stays as sent (compared as text with our own base64 of the digest).
    """
    value = value.strip()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != length:
        raise MalformedHeader(f"{header} must be the base64 of a {length}-byte HMAC digest")
    return value


def hex_digest(header: str, value: str, length: int, prefix: str = "") -> str:
    """The hex after ``prefix`` if it is ``length`` bytes of hex; else ``MalformedHeader``."""
    value = value.strip()
    digest = value.removeprefix(prefix) if prefix else value
    if (
        (prefix and not value.startswith(prefix))
        or len(digest) != 2 * length
        or not all(c in "0123456789abcdefABCDEF" for c in digest)
    ):
        raise MalformedHeader(f"{header} must be {prefix}<hex of a {length}-byte HMAC digest>")
    return digest.lower()


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")
