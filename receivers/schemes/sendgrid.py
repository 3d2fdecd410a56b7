"""SendGrid (Event Webhook): ``X-Twilio-Email-Event-Webhook-Signature`` is the base64 of
a DER ECDSA P-256 / SHA-256 signature over ``timestamp + raw body``, the timestamp being
``X-Twilio-Email-Event-Webhook-Timestamp`` (signed, so the window applies).

The source's secret is the verification key as SendGrid shows it (base64 of the DER public
key): public, and still the only thing that tells SendGrid's requests apart. The body is a
JSON array of events, each its own inbox row (id ``sg_event_id``, type ``event``, time
``timestamp``); the batch is stored in one transaction, so a repeated batch adds no row.
"""

import base64
import binascii
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_der_public_key

from receivers.schemes.base import (
    MAX_EVENT_ID_LENGTH,
    MAX_EVENT_TYPE_LENGTH,
    Envelope,
    Headers,
    MalformedEnvelope,
    MalformedHeader,
    Scheme,
    SignedParts,
    from_unix,
    parse_int,
    parse_json_array,
    require_text,
)

SIGNATURE = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP = "X-Twilio-Email-Event-Webhook-Timestamp"
#: A DER ECDSA P-256 signature is at most 72 bytes; more is not a signature.
MAX_SIGNATURE_BYTES = 80


class SendGridScheme(Scheme):
    name = "sendgrid"
    label = "SendGrid Event Webhook (ECDSA)"
    signature_headers = (SIGNATURE,)
    # SendGrid's key is public too, but ECDSA P-256 and SendGrid's own: one of our `whpk_`
    # (ed25519) keys is refused by the rule every scheme shares (`accepts_public_keys`).
    asks_for = (
        "the Event Webhook's verification key as SendGrid shows it: the base64 of an "
        "ECDSA P-256 public key"
    )

    def signed_parts(self, headers: Headers) -> SignedParts:
        signature = headers.get(SIGNATURE).strip()
        stamp = headers.get(TIMESTAMP).strip()
        timestamp = parse_int(stamp) if stamp else None
        if stamp and timestamp is None:
            raise MalformedHeader(f"{TIMESTAMP} must be a Unix time in seconds")
        if signature:
            try:
                raw = base64.b64decode(signature, validate=True)
            except (binascii.Error, ValueError):
                raw = b""
            if not 0 < len(raw) <= MAX_SIGNATURE_BYTES:
                raise MalformedHeader(f"{SIGNATURE} must be the base64 of a DER ECDSA signature")
        return SignedParts(candidates=[signature] if signature else [], timestamp=timestamp)

    def expected_signature(self, secret: str, parts: SignedParts, body: bytes) -> str | None:
        return None  # a public key verifies, it cannot sign: see signature_matches

    def signature_matches(self, secret: str, parts: SignedParts, body: bytes) -> bool:
        key = _public_key(secret)
        if key is None or parts.timestamp is None:
            return False
        signed = str(parts.timestamp).encode() + body
        hits = []
        for candidate in parts.candidates:
            try:
                key.verify(base64.b64decode(candidate), signed, ec.ECDSA(hashes.SHA256()))
            except InvalidSignature:
                hits.append(False)
            else:
                hits.append(True)
        return any(hits)

    def secret_problem(self, secret: str) -> str | None:
        problem = super().secret_problem(secret)
        if problem:
            return problem
        if _public_key(secret) is None:
            return f"a SendGrid source needs {self.asks_for}"
        return None

    def envelopes(self, headers: Headers, body: bytes, parts: SignedParts) -> list[Envelope]:
        items = parse_json_array(body)
        if not items:
            raise MalformedEnvelope("the batch has no events")
        envelopes = []
        for index, (event, raw) in enumerate(items):
            try:
                envelopes.append(self._envelope(event, raw))
            except MalformedEnvelope as exc:
                raise MalformedEnvelope(f"event {index} of the batch: {exc}") from None
        return envelopes

    def envelope(self, headers: Headers, body: bytes, parts: SignedParts) -> Envelope:
        envelopes = self.envelopes(headers, body, parts)
        if len(envelopes) != 1:
            raise MalformedEnvelope("the batch has more than one event")
        return envelopes[0]

    def _envelope(self, event: dict[str, Any], raw: bytes) -> Envelope:
        return Envelope(
            event_id=require_text(event.get("sg_event_id"), "sg_event_id", MAX_EVENT_ID_LENGTH),
            type=require_text(event.get("event"), "event", MAX_EVENT_TYPE_LENGTH),
            payload=event,
            provider_timestamp=self.provider_timestamp(event, SignedParts(candidates=[])),
            raw_body=raw,
        )

    def provider_timestamp(self, data: Mapping[str, Any], parts: SignedParts) -> datetime | None:
        return from_unix(data.get("timestamp"))


@lru_cache(maxsize=64)  # a public key, so nothing secret is kept in memory
def _public_key(secret: str) -> ec.EllipticCurvePublicKey | None:
    """The P-256 key ``secret`` is the base64 DER of (SendGrid's format), else None."""
    try:
        key = load_der_public_key(base64.b64decode(secret.strip(), validate=True))
    except (binascii.Error, ValueError, TypeError):
        return None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        return None
    return key
