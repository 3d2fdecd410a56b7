"""Slack (Events API): ``X-Slack-Signature: v0=<hex HMAC-SHA256(signing secret,
"v0:{X-Slack-Request-Timestamp}:{raw body}")>``.

The timestamp is signed, so the source's window refuses replays. The event id is the
body's ``event_id`` (a retry, with ``X-Slack-Retry-Num``, keeps it); the type is the inner
``event.type`` (``app_mention``), else the body's ``type``. When Slack checks a new Request
URL it sends a signed ``url_verification`` request: it is answered at once with its
``challenge`` and not stored.
"""

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from receivers.schemes.base import (
    MAX_EVENT_ID_LENGTH,
    MAX_EVENT_TYPE_LENGTH,
    Challenge,
    Envelope,
    Headers,
    MalformedEnvelope,
    MalformedHeader,
    SignedParts,
    from_unix,
    parse_int,
    parse_json_object,
    require_text,
)
from receivers.schemes.keyed import SHA256_BYTES, HmacScheme, hex_digest, hmac_sha256

SIGNATURE = "X-Slack-Signature"
TIMESTAMP = "X-Slack-Request-Timestamp"
MAX_CHALLENGE_LENGTH = 1000


class SlackScheme(HmacScheme):
    name = "slack"
    label = "Slack (X-Slack-Signature v0=)"
    signature_headers = (SIGNATURE,)

    def signed_parts(self, headers: Headers) -> SignedParts:
        signature = headers.get(SIGNATURE).strip()
        stamp = headers.get(TIMESTAMP).strip()
        timestamp = parse_int(stamp) if stamp else None
        if stamp and timestamp is None:
            raise MalformedHeader(f"{TIMESTAMP} must be a Unix time in seconds")
        if not signature:
            return SignedParts(candidates=[], timestamp=timestamp)
        candidate = hex_digest(SIGNATURE, signature, SHA256_BYTES, prefix="v0=")
        return SignedParts(candidates=[candidate], timestamp=timestamp)

    def expected_signature(self, secret: str, parts: SignedParts, body: bytes) -> str | None:
        if parts.timestamp is None:
            return None
        return hmac_sha256(secret, b"v0:%d:%s" % (parts.timestamp, body)).hex()

    def challenge(self, headers: Headers, body: bytes, parts: SignedParts) -> Challenge | None:
        if _is_form(headers):
            return None
        data = parse_json_object(body)
        if data.get("type") != "url_verification":
            return None
        value = require_text(data.get("challenge"), "challenge", MAX_CHALLENGE_LENGTH)
        return Challenge(body=json.dumps({"challenge": value}).encode())

    def envelope(self, headers: Headers, body: bytes, parts: SignedParts) -> Envelope:
        if _is_form(headers):
            raise MalformedEnvelope(
                "a form body is an interactive or slash-command request, which needs an "
                "answer within 3 seconds: give Slack's Events API Request URL this source"
            )
        data = parse_json_object(body)
        inner = data.get("event")
        event_type = inner.get("type") if isinstance(inner, dict) else None
        return Envelope(
            event_id=require_text(data.get("event_id"), "event_id", MAX_EVENT_ID_LENGTH),
            type=require_text(event_type or data.get("type"), "type", MAX_EVENT_TYPE_LENGTH),
            payload=data,
            provider_timestamp=self.provider_timestamp(data, parts),
        )

    def provider_timestamp(self, data: Mapping[str, Any], parts: SignedParts) -> datetime | None:
        return from_unix(data.get("event_time")) or super().provider_timestamp(data, parts)


def _is_form(headers: Headers) -> bool:
    return headers.get("Content-Type").startswith("application/x-www-form-urlencoded")
