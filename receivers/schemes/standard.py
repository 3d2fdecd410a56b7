"""Standard Webhooks (and Svix, which uses ``svix-*`` header names).

``webhook-signature: v1,<base64> [v1,<base64> ...]``, HMAC-SHA256 keyed with the
base64-decoded part of the secret after ``whsec_``, over ``"<msg id>.<ts>.<raw body>"``.
The event id is the ``webhook-id`` header, the type is the body's ``type``.

A source may also hold ``whpk_`` ed25519 public keys (Standard Webhooks ``v1a``, as Svix
signs): such a key verifies the ``v1a,<base64>`` entries over the same signed content. A
source can mix both kinds during a migration; every unexpired secret or key is tried.
"""

import base64
import binascii
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from receivers.schemes.base import (
    MAX_EVENT_ID_LENGTH,
    MAX_EVENT_TYPE_LENGTH,
    MAX_SIGNATURES,
    Envelope,
    Headers,
    Scheme,
    SignedParts,
    from_iso,
    parse_int,
    parse_json_object,
    require_text,
    split_signature_list,
)
from webhooks_core.crypto import signing

# The specification asks for 24 to 64 bytes; 16 still refuses what is plainly a typo.
MIN_KEY_BYTES = 16
#: What each version's signature decodes to: HMAC-SHA256 and ed25519.
SIGNATURE_BYTES = {"v1": 32, "v1a": 64}


def _entry_problem(entry: str) -> str:
    version, _, encoded = entry.partition(",")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return f"a {version} signature is not base64"
    if len(raw) != SIGNATURE_BYTES[version]:
        return f"a {version} signature is not {SIGNATURE_BYTES[version]} bytes"
    return ""


class StandardScheme(Scheme):
    name = "standard"
    label = "Standard Webhooks / Svix"
    generates_secrets = True
    signature_headers = ("webhook-signature", "svix-signature")
    accepts_public_keys = True  # whpk_ keys verify v1a entries with ed25519, never an HMAC

    def signed_parts(self, headers: Headers) -> SignedParts:
        entries, malformed = split_signature_list(
            headers.first("webhook-signature", "svix-signature")
        )
        # Symmetric v1 and asymmetric v1a signatures; unknown versions are skipped.
        candidates = [e for e in entries if e.startswith(("v1,", "v1a,"))]
        msg_id = headers.first("webhook-id", "svix-id")
        if not malformed and not msg_id:
            malformed = "no message id"
        if not malformed and len(candidates) <= MAX_SIGNATURES:
            # Checked only under the cap: past it the request is refused unread.
            malformed = next(filter(None, map(_entry_problem, candidates)), "")
        return SignedParts(
            candidates=candidates,
            timestamp=parse_int(headers.first("webhook-timestamp", "svix-timestamp")),
            msg_id=msg_id,
            malformed=malformed,
        )

    def expected_signature(self, secret: str, parts: SignedParts, body: bytes) -> str | None:
        if parts.timestamp is None or not parts.msg_id:
            return None
        try:
            return signing.sign_standard(secret, parts.msg_id, parts.timestamp, body)
        except ValueError:
            return None  # a secret that is not base64 (or empty) cannot have signed this

    def signature_matches(self, secret: str, parts: SignedParts, body: bytes) -> bool:
        if not secret.startswith(signing.PUBLIC_KEY_PREFIX):
            return super().signature_matches(secret, parts, body)
        if parts.timestamp is None or not parts.msg_id:
            return False
        # The signed message is built once for every entry; ed25519 (RFC 8032, the pure
        # variant Standard Webhooks uses) hashes it inside each verification and cannot be
        # given a digest, so `MAX_SIGNATURES` is what bounds the work. An entry sent twice
        # is verified once. Every entry is checked (no early exit); ed25519 verification
        # itself does not leak through its timing which bytes of a forged signature were
        # wrong.
        message = signing.standard_signed_content(parts.msg_id, parts.timestamp, body)
        entries = dict.fromkeys(c for c in parts.candidates if c.startswith("v1a,"))
        hits = [signing.verify_v1a_message(secret, message, entry) for entry in entries]
        return any(hits)

    def secret_problem(self, secret: str) -> str | None:
        problem = super().secret_problem(secret)
        if problem:
            return problem
        if secret.startswith(signing.PUBLIC_KEY_PREFIX):
            try:
                signing.check_public_key(secret)
            except signing.InvalidKey as exc:
                return str(exc)
            return None
        if secret.startswith(signing.PRIVATE_KEY_PREFIX):
            return "that is a private 'whsk_' key: give the source its 'whpk_' public key"
        try:
            key = signing.standard_webhooks_key(secret)
        except ValueError:
            return "a Standard Webhooks secret is 'whsec_' followed by base64 (padding optional)"
        if len(key) < MIN_KEY_BYTES:
            # The libraries would sign with it, but a key this short can be guessed.
            return (
                f"a Standard Webhooks secret is 'whsec_' followed by the base64 of at least "
                f"{MIN_KEY_BYTES} bytes (this one has {len(key)})"
            )
        return None

    def envelope(self, headers: Headers, body: bytes, parts: SignedParts) -> Envelope:
        data = parse_json_object(body)
        return Envelope(
            event_id=require_text(parts.msg_id, "webhook-id", MAX_EVENT_ID_LENGTH),
            type=require_text(data.get("type"), "type", MAX_EVENT_TYPE_LENGTH),
            payload=data,
            provider_timestamp=self.provider_timestamp(data, parts),
        )

    def provider_timestamp(self, data: Mapping[str, Any], parts: SignedParts) -> datetime | None:
        return from_iso(data.get("timestamp")) or super().provider_timestamp(data, parts)
