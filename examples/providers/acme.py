"""A provider written outside the library: the example of the guide "Write a provider".

"Acme" signs each request with HMAC-SHA256 over its timestamp, the URL it called and the
body; one request carries several events; a new webhook URL is checked with a challenge
that must be answered, not stored::

    Acme-Signature: t=1767225600,v1=<hex>[,v1=<hex of the next secret, during a rotation>]

    {"events": [{"id": "evt_1", "type": "invoice.paid", "created": 1767225600, "data": {}}]}
    {"type": "url.verify", "challenge": "<random text>"}

A host enables it with ``RECEIVERS_SCHEMES = ["examples.providers.acme.AcmeScheme"]``; a
source then names it (``scheme="acme"``) like any built-in provider.
"""

import hashlib
import hmac
import json
from datetime import UTC, datetime
from typing import Any

from receivers.schemes import Challenge, Envelope, Headers, MalformedEnvelope, Scheme, SignedParts
from receivers.schemes.base import parse_json_object

SECRET_PREFIX = "acme_sk_"  # noqa: S105  (a format, not a secret)


class AcmeScheme(Scheme):
    name = "acme"
    label = "Acme (Acme-Signature)"
    #: Never stored with the inbox rows.
    signature_headers = ("Acme-Signature",)
    has_timestamp = True  # requests older than the source's tolerance are refused
    signs_url = True  # the pipeline fills SignedParts.url (the source's public_url if set)
    generates_secrets = False  # Acme shows the secret; a source must be given it
    asks_for = "the signing secret (acme_sk_...) shown on Acme's webhook page"

    def signed_parts(self, headers: Headers) -> SignedParts:
        timestamp, candidates = None, []
        for item in headers.get("Acme-Signature").split(","):
            key, _, value = item.strip().partition("=")
            if key == "t" and value.isascii() and value.isdigit() and len(value) <= 12:
                timestamp = int(value)
            elif key == "v1" and value:
                candidates.append(value)
        return SignedParts(candidates=candidates, timestamp=timestamp)

    def expected_signature(self, secret: str, parts: SignedParts, body: bytes) -> str | None:
        if parts.timestamp is None or not parts.url:
            return None
        signed = f"{parts.timestamp}.{parts.url}.".encode() + body
        return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()

    def secret_problem(self, secret: str) -> str | None:
        problem = super().secret_problem(secret)
        if problem is None and not secret.startswith(SECRET_PREFIX):
            problem = f"an Acme signing secret starts with {SECRET_PREFIX!r}"
        return problem

    def challenge(self, headers: Headers, body: bytes, parts: SignedParts) -> Challenge | None:
        data = parse_json_object(body)
        if data.get("type") != "url.verify":
            return None
        answer = data.get("challenge")
        if not isinstance(answer, str) or not answer:
            raise MalformedEnvelope("a url.verify request without its challenge")
        return Challenge(body=json.dumps({"challenge": answer}).encode())

    def envelopes(self, headers: Headers, body: bytes, parts: SignedParts) -> list[Envelope]:
        events = parse_json_object(body).get("events")
        if not isinstance(events, list) or not events:
            raise MalformedEnvelope("'events' must be a non-empty list")
        return [_envelope(event, index) for index, event in enumerate(events)]


def _envelope(event: Any, index: int) -> Envelope:
    if not isinstance(event, dict):
        raise MalformedEnvelope(f"event {index} is not an object")
    event_id, event_type = event.get("id"), event.get("type")
    if not isinstance(event_id, str) or not 0 < len(event_id) <= 255:
        raise MalformedEnvelope(f"event {index} has no 'id' (text, at most 255 characters)")
    if not isinstance(event_type, str) or not 0 < len(event_type) <= 200:
        raise MalformedEnvelope(f"event {index} has no 'type' (text, at most 200 characters)")
    created = event.get("created")
    return Envelope(
        event_id=event_id,
        type=event_type,
        payload=event,
        provider_timestamp=(
            datetime.fromtimestamp(created, tz=UTC)
            if isinstance(created, int) and not isinstance(created, bool) and 0 < created < 10**11
            else None
        ),
    )


def sign(secret: str, timestamp: int, url: str, body: bytes) -> str:
    """The ``Acme-Signature`` header Acme would send (for tests and local tries)."""
    digest = hmac.new(secret.encode(), f"{timestamp}.{url}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"
