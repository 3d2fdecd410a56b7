"""Paddle Billing: ``Paddle-Signature: ts=<unix>;h1=<hex HMAC-SHA256(secret,
"{ts}:{raw body}")>``, with several ``h1`` while Paddle rotates the secret.

The timestamp is signed, so the source's window refuses replays (Paddle's own SDK allows
5 seconds; set the source's tolerance to match if your clocks are good). The event id is
the body's ``event_id``, the type its ``event_type``, the provider's time ``occurred_at``.
"""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from receivers.schemes.base import (
    MAX_EVENT_ID_LENGTH,
    MAX_EVENT_TYPE_LENGTH,
    MAX_SIGNATURES,
    Envelope,
    Headers,
    MalformedHeader,
    SignedParts,
    from_iso,
    parse_int,
    parse_json_object,
    require_text,
)
from receivers.schemes.keyed import SHA256_BYTES, HmacScheme, hex_digest, hmac_sha256

SIGNATURE = "Paddle-Signature"
FORMAT = f"{SIGNATURE} must be ts=<unix seconds>;h1=<hex>[;h1=<hex>...]"


class PaddleScheme(HmacScheme):
    name = "paddle"
    label = "Paddle Billing (Paddle-Signature)"
    signature_headers = (SIGNATURE,)

    def signed_parts(self, headers: Headers) -> SignedParts:
        header = headers.get(SIGNATURE).strip()
        if not header:
            return SignedParts(candidates=[])
        timestamp: int | None = None
        signatures: list[str] = []
        for part in filter(None, (p.strip() for p in header.split(";"))):
            key, equals, value = part.partition("=")
            if not equals:
                raise MalformedHeader(FORMAT)
            if key == "ts":
                timestamp = parse_int(value)
                if timestamp is None:
                    raise MalformedHeader(FORMAT)
            elif key == "h1":
                signatures.append(value)
            # Other keys (a future h2) are skipped, as an unknown version should be.
        if timestamp is None or not signatures:
            raise MalformedHeader(FORMAT)
        if len(signatures) > MAX_SIGNATURES:
            # Refused unread by `screen` (400, too many signatures), whatever they hold.
            return SignedParts(candidates=signatures, timestamp=timestamp)
        candidates = [hex_digest(SIGNATURE, value, SHA256_BYTES) for value in signatures]
        return SignedParts(candidates=candidates, timestamp=timestamp)

    def expected_signature(self, secret: str, parts: SignedParts, body: bytes) -> str | None:
        if parts.timestamp is None:
            return None
        return hmac_sha256(secret, b"%d:%s" % (parts.timestamp, body)).hex()

    def envelope(self, headers: Headers, body: bytes, parts: SignedParts) -> Envelope:
        data = parse_json_object(body)
        return Envelope(
            event_id=require_text(data.get("event_id"), "event_id", MAX_EVENT_ID_LENGTH),
            type=require_text(data.get("event_type"), "event_type", MAX_EVENT_TYPE_LENGTH),
            payload=data,
            provider_timestamp=self.provider_timestamp(data, parts),
        )

    def provider_timestamp(self, data: Mapping[str, Any], parts: SignedParts) -> datetime | None:
        return from_iso(data.get("occurred_at")) or super().provider_timestamp(data, parts)
