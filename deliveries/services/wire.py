"""What goes on the wire for a delivery: the JSON body and the headers, signed."""

import json
from collections.abc import Iterable
from datetime import UTC

from .. import rendering, signing
from ..models import Delivery, Endpoint, Event

REDACTED = "[redacted]"
SENSITIVE_HEADER_WORDS = ("signature", "authorization", "secret", "token", "key", "cookie")


def render_body(event: Event, endpoint: Endpoint | None = None) -> bytes:
    version, data = rendering.versioned_payload(event, endpoint)
    occurred_at = event.occurred_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    envelope = {
        "id": str(event.id),
        "type": event.type,
        "version": version,
        "occurred_at": occurred_at,
        "data": data,
    }
    return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def build_headers(
    delivery: Delivery, body: bytes, secrets: list[str], timestamp: int
) -> dict[str, str]:
    event_id = str(delivery.event_id)
    headers = delivery.endpoint.custom_headers_plain()
    ours = {
        "Content-Type": "application/json",
        "X-Webhook-Id": event_id,
        "X-Webhook-Event": delivery.event.type,
        "X-Webhook-Timestamp": str(timestamp),
        "X-Webhook-Replay": "true" if delivery.is_replay else "false",
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        **signing.signature_headers(secrets, msg_id=event_id, timestamp=timestamp, body=body),
        **({"traceparent": delivery.event.traceparent} if delivery.event.traceparent else {}),
    }
    # Our headers win over custom ones, whatever their case.
    reserved = {name.lower() for name in ours}
    headers = {k: v for k, v in headers.items() if k.lower() not in reserved}
    headers.update(ours)
    return headers


def redact_headers(headers: dict[str, str], secret_names: Iterable[str] = ()) -> dict[str, str]:
    """The headers as an attempt stores them: credentials (by name, or marked secret on
    the endpoint) replaced by a placeholder."""
    marked = {name.lower() for name in secret_names}
    return {
        name: REDACTED
        if name.lower() in marked or any(word in name.lower() for word in SENSITIVE_HEADER_WORDS)
        else value
        for name, value in headers.items()
    }
