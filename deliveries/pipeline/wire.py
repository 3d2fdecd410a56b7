"""What goes on the wire for a delivery: the JSON body and the headers, signed."""

import json
from collections.abc import Iterable, Sequence
from datetime import datetime

from deliveries import conf
from deliveries.endpoints import validation_rules
from deliveries.endpoints.headers import MASK, is_credential
from deliveries.models import Delivery, Endpoint, Event
from deliveries.pipeline import rendering
from webhooks_core.crypto import signing


def render_body(event: Event, endpoint: Endpoint | None = None) -> bytes:
    version, data = rendering.versioned_payload(event, endpoint)
    kind = _envelope_of(endpoint)
    document = rendering.envelope(
        kind,
        event_id=str(event.id),
        event_type=event.type,
        version=version,
        occurred_at=event.occurred_at,
        data=data,
        source=conf.get().cloudevents_source if kind == rendering.CLOUDEVENTS else "",
    )
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _envelope_of(endpoint: Endpoint | None) -> str:
    return getattr(endpoint, "envelope", None) or rendering.DEFAULT


def uses_signing_keys(endpoint: Endpoint) -> bool:
    """Whether the endpoint's scheme signs ``v1a`` entries (with private keys)."""
    return endpoint.signature_scheme in (signing.SCHEME_V1A, signing.SCHEME_BOTH)


def signing_keys(endpoint: Endpoint, now: datetime) -> list[str] | None:
    """The private keys that sign ``v1a`` entries: [] when the scheme has none, None when
    it needs one and every key has expired."""
    if not uses_signing_keys(endpoint):
        return []
    keys = [key.value for key in endpoint.signing_keys.unexpired(now)]
    return keys or None


def message_headers(
    delivery: Delivery,
    body: bytes,
    secrets: list[str],
    timestamp: int,
    *,
    private_keys: Sequence[str] = (),
) -> dict[str, str]:
    """The headers that name and sign a delivery's body, whatever carries it (a request, a
    broker's message, a polled message). A polled message carries only these; a push adds
    the endpoint's custom headers (`build_headers`), credentials for its server."""
    event_id = str(delivery.event_id)
    endpoint = delivery.endpoint
    signed = signing.signature_headers(
        secrets,
        msg_id=event_id,
        timestamp=timestamp,
        body=body,
        scheme=endpoint.signature_scheme or signing.SCHEME_V1,
        private_keys=private_keys,
    )
    return {
        "Content-Type": rendering.content_type(_envelope_of(endpoint)),
        "X-Webhook-Id": event_id,
        "X-Webhook-Event": delivery.event.type,
        "X-Webhook-Timestamp": str(timestamp),
        "X-Webhook-Replay": "true" if delivery.is_replay else "false",
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        **signed,
    }


def build_headers(
    delivery: Delivery,
    body: bytes,
    secrets: list[str],
    timestamp: int,
    *,
    private_keys: Sequence[str] = (),
) -> dict[str, str]:
    """A push's headers: the message's, the event's trace, the handshake's origin, and the
    endpoint's custom headers (ours win over them, whatever their case)."""
    endpoint = delivery.endpoint
    headers = endpoint.custom_headers_plain()
    traceparent = delivery.event.traceparent
    ours = {
        **message_headers(delivery, body, secrets, timestamp, private_keys=private_keys),
        **({"traceparent": traceparent} if traceparent else {}),
        **_validation_headers(endpoint),
    }
    reserved = {name.lower() for name in ours}
    headers = {k: v for k, v in headers.items() if k.lower() not in reserved}
    headers.update(ours)
    return headers


def _validation_headers(endpoint: Endpoint) -> dict[str, str]:
    """The CloudEvents webhook spec: after the handshake, every delivery carries the
    origin the target consented to."""
    if getattr(endpoint, "validation", None) != "cloudevents":
        return {}
    origin = conf.validation().origin
    return {validation_rules.REQUEST_ORIGIN: origin} if origin else {}


def redact_headers(headers: dict[str, str], secret_names: Iterable[str] = ()) -> dict[str, str]:
    """The headers as an attempt stores them: credentials (by name, or marked secret on
    the endpoint) replaced by the mask every read shows (``headers.MASK``)."""
    marked = {name.lower() for name in secret_names}
    return {
        name: MASK if name.lower() in marked or is_credential(name) else value
        for name, value in headers.items()
    }
