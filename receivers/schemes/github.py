"""GitHub: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, raw body)>``.

There is no signed timestamp, so no replay window: duplicates are caught by the inbox's
unique ``(source, X-GitHub-Delivery)`` alone (a redelivery keeps its delivery id). The
type is ``X-GitHub-Event``, followed by ``.<action>`` when the body has one
(``pull_request.opened``), as GitHub advises checking both.
"""

import hashlib
import hmac
from urllib.parse import parse_qs

from receivers.schemes.base import (
    MAX_EVENT_ID_LENGTH,
    MAX_EVENT_TYPE_LENGTH,
    Envelope,
    Headers,
    MalformedEnvelope,
    Scheme,
    SignedParts,
    parse_json_object,
    require_text,
)

PREFIX = "sha256="


class GitHubScheme(Scheme):
    name = "github"
    label = "GitHub (X-Hub-Signature-256)"
    signature_headers = ("X-Hub-Signature-256", "X-Hub-Signature")
    has_timestamp = False

    def signed_parts(self, headers: Headers) -> SignedParts:
        header = headers.get("X-Hub-Signature-256").strip()
        candidates = [header.removeprefix(PREFIX)] if header.startswith(PREFIX) else []
        return SignedParts(candidates=candidates, msg_id=headers.get("X-GitHub-Delivery"))

    def expected_signature(self, secret: str, parts: SignedParts, body: bytes) -> str | None:
        return hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()

    def envelope(self, headers: Headers, body: bytes, parts: SignedParts) -> Envelope:
        if headers.get("Content-Type").startswith("application/x-www-form-urlencoded"):
            form = parse_qs(body.decode("utf-8", "replace"))
            if "payload" not in form:
                raise MalformedEnvelope("form body without a 'payload' field")
            body = form["payload"][0].encode("utf-8")
        data = parse_json_object(body)
        event = require_text(headers.get("X-GitHub-Event"), "X-GitHub-Event", 100)
        action = data.get("action")
        event_type = f"{event}.{action}" if isinstance(action, str) and action else event
        return Envelope(
            event_id=require_text(parts.msg_id, "X-GitHub-Delivery", MAX_EVENT_ID_LENGTH),
            type=require_text(event_type, "type", MAX_EVENT_TYPE_LENGTH),
            payload=data,
        )
