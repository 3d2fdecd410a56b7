"""Twilio: ``X-Twilio-Signature: base64(HMAC-SHA1(auth token, URL + form fields))``.

The signed string is the full URL Twilio called (query string included) followed by the
form fields sorted by name, each name followed by its value, as Twilio's own
``RequestValidator`` builds it. A JSON body is signed differently: Twilio adds
``bodySHA256=<hex SHA-256 of the body>`` to the URL and signs the URL alone, so the body
is checked against that hash. Twilio is not consistent about the port, so the URL is
tried as given, with its default port, and without it.

The URL is the one Twilio called: the source's ``public_url`` (plus the request's query
string) behind a proxy, else the request's own absolute URL. Twilio signs no time: the
inbox's dedupe on ``I-Twilio-Idempotency-Token`` (else the resource SID and status) is
the replay defence.
"""

import hashlib
import hmac
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlsplit, urlunsplit

from receivers.schemes.base import (
    MAX_EVENT_ID_LENGTH,
    MAX_EVENT_TYPE_LENGTH,
    Envelope,
    Headers,
    MalformedEnvelope,
    SignedParts,
    parse_json_object,
    require_text,
)
from receivers.schemes.keyed import SHA1_BYTES, HmacScheme, b64, base64_digest

SIGNATURE = "X-Twilio-Signature"
IDEMPOTENCY_TOKEN = "I-Twilio-Idempotency-Token"  # noqa: S105  (a header name)
BODY_HASH = "bodySHA256"
#: Where a form callback names its resource and status, most specific first.
RESOURCES = (
    ("recording", "RecordingSid", ("RecordingStatus",)),
    ("transcription", "TranscriptionSid", ("TranscriptionStatus",)),
    ("message", "MessageSid", ("MessageStatus", "SmsStatus")),
    ("message", "SmsSid", ("SmsStatus",)),
    ("call", "CallSid", ("CallStatus",)),
)


class TwilioScheme(HmacScheme):
    name = "twilio"
    label = "Twilio (X-Twilio-Signature)"
    signature_headers = (SIGNATURE,)
    has_timestamp = False
    signs_url = True

    def signed_parts(self, headers: Headers) -> SignedParts:
        signature = headers.get(SIGNATURE).strip()
        candidates = [base64_digest(SIGNATURE, signature, SHA1_BYTES)] if signature else []
        return SignedParts(candidates=candidates, msg_id=headers.get(IDEMPOTENCY_TOKEN).strip())

    def expected_signature(self, secret: str, parts: SignedParts, body: bytes) -> str | None:
        if not parts.url:
            return None
        return _signature(secret, parts.url, body)

    def signature_matches(self, secret: str, parts: SignedParts, body: bytes) -> bool:
        if not parts.url:
            return False
        body_hash = _body_hash(parts.url)
        # Every variant is compared with every candidate, each in constant time.
        hits = [
            hmac.compare_digest(_signature(secret, url, body).encode(), candidate.encode())
            for url in _port_variants(parts.url)
            for candidate in parts.candidates
        ]
        if body_hash is not None:
            digest = hashlib.sha256(body).hexdigest()
            hits = [hmac.compare_digest(digest.encode(), body_hash.lower().encode()) and any(hits)]
        return any(hits)

    def signed_material(self, parts: SignedParts, body: bytes) -> bytes:
        # The string Twilio signs (form fields sorted, so a reordered body is the same
        # material), of the URL without a default port (tried either way when verifying).
        url = _port_variants(parts.url)
        canonical = min(url, key=len)
        return _signed_string(canonical, body).encode("utf-8")

    def envelope(self, headers: Headers, body: bytes, parts: SignedParts) -> Envelope:
        if _body_hash(parts.url) is not None or headers.get("Content-Type").startswith(
            "application/json"
        ):
            data: dict[str, Any] = parse_json_object(body)
            event_id = parts.msg_id or data.get("id") or data.get("sid")
            event_type = data.get("type") or data.get("EventType")
        else:
            data = _form_payload(body)
            resource, sid, status = _resource(data)
            event_id = parts.msg_id or (f"{sid}:{status}" if status else sid)
            event_type = data.get("EventType") or (
                f"{resource}.{status.lower()}" if status else resource
            )
        return Envelope(
            event_id=require_text(event_id, IDEMPOTENCY_TOKEN, MAX_EVENT_ID_LENGTH),
            type=require_text(event_type, "type", MAX_EVENT_TYPE_LENGTH),
            payload=data,
        )


def _signature(secret: str, url: str, body: bytes) -> str:
    signed = _signed_string(url, body)
    mac = hmac.new(secret.encode("utf-8"), signed.encode("utf-8"), hashlib.sha1)
    return b64(mac.digest())


def _signed_string(url: str, body: bytes) -> str:
    """The URL, then (for a form) its fields; a JSON body is signed through its hash in
    the URL (``bodySHA256``)."""
    signed = url
    if _body_hash(url) is None:
        fields: dict[str, set[str]] = {}
        for name, value in _form_fields(body):
            fields.setdefault(name, set()).add(value)
        # As Twilio's RequestValidator: names in code point order, each value once, sorted.
        signed += "".join(name + value for name in sorted(fields) for value in sorted(fields[name]))
    return signed


def _form_fields(body: bytes) -> list[tuple[str, str]]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedEnvelope("the form body is not UTF-8") from None
    return parse_qsl(text, keep_blank_values=True)


def _form_payload(body: bytes) -> dict[str, Any]:
    payload: dict[str, Any] = {}
    for name, value in _form_fields(body):
        if "\x00" in name or "\x00" in value:
            raise MalformedEnvelope("the form body contains a NUL character")
        if name in payload:
            previous = payload[name]
            payload[name] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            payload[name] = value
    return payload


def _resource(data: dict[str, Any]) -> tuple[str, str, str]:
    for resource, sid_field, status_fields in RESOURCES:
        sid = data.get(sid_field)
        if isinstance(sid, str) and sid:
            status = next(
                (s for s in (data.get(f) for f in status_fields) if isinstance(s, str) and s),
                "",
            )
            return resource, sid, status
    return "", "", ""


def _body_hash(url: str) -> str | None:
    values = parse_qs(urlsplit(url).query).get(BODY_HASH)
    return values[0] if values else None


def _port_variants(url: str) -> list[str]:
    parts = urlsplit(url)
    host, _, port = parts.netloc.rpartition(":")
    if port.isdigit() and not parts.netloc.endswith("]"):
        other = host
    else:
        default = "443" if parts.scheme == "https" else "80"
        other = f"{parts.netloc}:{default}"
    return [url, urlunsplit(parts._replace(netloc=other))]
