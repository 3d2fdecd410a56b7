"""Our own sender's scheme (docs/wire-format.md): ``X-Webhook-Signature: t=<ts>,v1=<hex>[,v1=...]``.

The hex is HMAC-SHA256 keyed with the secret string as shown (``whsec_...``, UTF-8) over
``"<ts>.<raw body>"``: exactly ``webhooks_core.crypto.signing.sign_v1``, reused here.
"""

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from receivers.schemes.base import Headers, Scheme, SignedParts, from_iso, parse_int
from webhooks_core.crypto import signing


def parse_t_v1(header: str) -> SignedParts:
    """``t=<ts>,v1=<sig>,v1=<sig>,...``; other keys (``v0=``) are ignored."""
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            timestamp = parse_int(value)
        elif key == "v1" and value:
            candidates.append(value.strip())
    return SignedParts(candidates=candidates, timestamp=timestamp)


class OursScheme(Scheme):
    name = "ours"
    label = "Ours (X-Webhook-Signature t=,v1=)"
    generates_secrets = True
    signature_header: ClassVar[str] = "X-Webhook-Signature"
    signature_headers: ClassVar[tuple[str, ...]] = ("X-Webhook-Signature", "webhook-signature")

    def signed_parts(self, headers: Headers) -> SignedParts:
        return parse_t_v1(headers.get(self.signature_header))

    def expected_signature(self, secret: str, parts: SignedParts, body: bytes) -> str | None:
        if parts.timestamp is None:
            return None
        return signing.sign_v1(secret, parts.timestamp, body)

    def provider_timestamp(self, data: Mapping[str, Any], parts: SignedParts) -> datetime | None:
        return from_iso(data.get("occurred_at")) or super().provider_timestamp(data, parts)
