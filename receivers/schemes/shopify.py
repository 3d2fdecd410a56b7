"""Shopify: ``X-Shopify-Hmac-Sha256: base64(HMAC-SHA256(secret, raw body))``.

Shopify signs no time, so there is no replay window: duplicates are caught by the inbox's
unique ``(source, X-Shopify-Webhook-Id)`` alone (a redelivery keeps its ids). The type is
``X-Shopify-Topic`` (``orders/create``), the provider's time ``X-Shopify-Triggered-At``.
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

SIGNATURE = "X-Shopify-Hmac-Sha256"


class ShopifyScheme(HmacScheme):
    name = "shopify"
    label = "Shopify (X-Shopify-Hmac-Sha256)"
    signature_headers = (SIGNATURE,)
    has_timestamp = False

    def signed_parts(self, headers: Headers) -> SignedParts:
        signature = headers.get(SIGNATURE).strip()
        candidates = [base64_digest(SIGNATURE, signature, SHA256_BYTES)] if signature else []
        return SignedParts(
            candidates=candidates,
            msg_id=headers.first("X-Shopify-Webhook-Id", "X-Shopify-Event-Id"),
        )

    def expected_signature(self, secret: str, parts: SignedParts, body: bytes) -> str | None:
        return b64(hmac_sha256(secret, body))

    def envelope(self, headers: Headers, body: bytes, parts: SignedParts) -> Envelope:
        data = parse_json_object(body)
        triggered_at = headers.get("X-Shopify-Triggered-At")
        return Envelope(
            event_id=require_text(parts.msg_id, "X-Shopify-Webhook-Id", MAX_EVENT_ID_LENGTH),
            type=require_text(
                headers.get("X-Shopify-Topic"), "X-Shopify-Topic", MAX_EVENT_TYPE_LENGTH
            ),
            payload=data,
            provider_timestamp=from_iso(triggered_at),
        )

    def provider_timestamp(self, data: Mapping[str, Any], parts: SignedParts) -> datetime | None:
        return None
