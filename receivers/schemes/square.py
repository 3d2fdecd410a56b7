"""Square: ``x-square-hmacsha256-signature: base64(HMAC-SHA256(signature key,
notification URL + raw body))``.

The URL is the subscription's notification URL exactly as configured at Square: the
source's ``public_url`` (plus the request's query string) when a proxy stands in front,
else the URL the request reached. Square signs no time, so there is no replay window:
the inbox's unique ``(source, event_id)`` catches redeliveries. The type is ``type``
(``payment.updated``), the provider's time ``created_at``.
"""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from receivers.schemes.base import (
    MAX_EVENT_ID_LENGTH,
    MAX_EVENT_TYPE_LENGTH,
    Envelope,
    Headers,
    SignedParts,
    from_iso,
    parse_json_object,
    require_text,
)
from receivers.schemes.keyed import SHA256_BYTES, HmacScheme, b64, base64_digest, hmac_sha256

SIGNATURE = "x-square-hmacsha256-signature"


class SquareScheme(HmacScheme):
    name = "square"
    label = "Square (x-square-hmacsha256-signature)"
    # The older SHA-1 header is never checked, and never stored either.
    signature_headers = (SIGNATURE, "x-square-signature")
    has_timestamp = False
    signs_url = True

    def signed_parts(self, headers: Headers) -> SignedParts:
        signature = headers.get(SIGNATURE).strip()
        candidates = [base64_digest(SIGNATURE, signature, SHA256_BYTES)] if signature else []
        return SignedParts(candidates=candidates)

    def expected_signature(self, secret: str, parts: SignedParts, body: bytes) -> str | None:
        if not parts.url:
            return None
        return b64(hmac_sha256(secret, parts.url.encode("utf-8") + body))

    def signed_material(self, parts: SignedParts, body: bytes) -> bytes:
        return parts.url.encode("utf-8") + body

    def envelope(self, headers: Headers, body: bytes, parts: SignedParts) -> Envelope:
        data = parse_json_object(body)
        return Envelope(
            event_id=require_text(data.get("event_id"), "event_id", MAX_EVENT_ID_LENGTH),
            type=require_text(data.get("type"), "type", MAX_EVENT_TYPE_LENGTH),
            payload=data,
            provider_timestamp=self.provider_timestamp(data, parts),
        )

    def provider_timestamp(self, data: Mapping[str, Any], parts: SignedParts) -> datetime | None:
        return from_iso(data.get("created_at"))
