"""Six providers (Slack, Twilio, Paddle, Square, SendGrid, Shopify), each signing requests
the way the provider does.

Where the provider's SDK signs (Slack's ``SignatureVerifier.generate_signature``, Twilio's
``RequestValidator.compute_signature``) the SDK signs; where it only verifies (Paddle,
Square, SendGrid) the request is signed from the provider's documented recipe here and
``tests/receivers/schemes/test_providers.py`` checks each such signature with the SDK's
verifier. Shopify publishes no Python SDK that verifies webhooks; its recipe is signed here
and checked against the documentation's example in the same file.

One adapter per provider, the same interface for all, so every case runs for each.
"""

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass, field, replace
from urllib.parse import urlencode

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from slack_sdk.signature import SignatureVerifier
from twilio.request_validator import RequestValidator

#: Every body has this marker, which a tampering test changes into "501".
MARKER = b"500"


@dataclass(frozen=True)
class Key:
    """What the source is configured with, and what the provider signs with."""

    secret: str
    signer: object


@dataclass(frozen=True)
class Signed:
    body: bytes
    headers: dict[str, str]
    content_type: str = "application/json"
    query: str = ""  # the request's query string (part of what Twilio signs)

    def tampered(self) -> "Signed":
        assert MARKER in self.body
        return replace(self, body=self.body.replace(MARKER, b"501", 1))

    def with_headers(self, **changes: str | None) -> "Signed":
        headers = {k: v for k, v in self.headers.items() if k not in changes}
        headers.update({k: v for k, v in changes.items() if v is not None})
        return replace(self, headers=headers)


@dataclass(frozen=True)
class Provider:
    scheme: str
    #: The header whose absence is a missing signature (401).
    signature_header: str
    #: A header value the provider could never send (400).
    malformed: dict[str, str] = field(default_factory=dict)
    signs_time: bool = True
    signs_url: bool = False
    #: Event types a request of ``event_ids`` stores, in order.
    event_type: str = ""

    def __str__(self) -> str:
        return self.scheme

    def new_key(self) -> Key:
        secret = secrets.token_hex(16)
        return Key(secret=secret, signer=secret)

    def event_ids(self, event_id: str) -> list[str]:
        return [event_id]

    def request(self, key: Key, event_id: str, *, url: str, ts: int | None = None) -> Signed:
        raise NotImplementedError


def _now(ts: int | None) -> int:
    return int(time.time()) if ts is None else ts


def _hmac256(secret: str, message: bytes) -> bytes:
    return hmac.new(secret.encode(), message, hashlib.sha256).digest()


class Slack(Provider):
    def request(self, key: Key, event_id: str, *, url: str, ts: int | None = None) -> Signed:
        ts = _now(ts)
        body = json.dumps(
            {
                "token": "verification-token-unused",
                "team_id": "T061EG9R6",
                "api_app_id": "A0PNCHHK2",
                "event": {"type": "app_mention", "text": "amount 500", "user": "U061F7AUR"},
                "type": "event_callback",
                "event_id": event_id,
                "event_time": ts,
            }
        ).encode()
        return Signed(body=body, headers=slack_headers(str(key.signer), body, ts))


def slack_headers(secret: str, body: bytes, ts: int) -> dict[str, str]:
    signature = SignatureVerifier(secret).generate_signature(timestamp=str(ts), body=body.decode())
    assert signature is not None
    return {"X-Slack-Signature": signature, "X-Slack-Request-Timestamp": str(ts)}


class Twilio(Provider):
    def request(self, key: Key, event_id: str, *, url: str, ts: int | None = None) -> Signed:
        params = {
            "AccountSid": "AC" + "1" * 32,
            "MessageSid": "SM" + hashlib.md5(event_id.encode()).hexdigest(),  # noqa: S324
            "MessageStatus": "delivered",
            "To": "+15558675310",
            "From": "+15017122661",
            "Body": "amount 500 ✓",
        }
        signature = RequestValidator(str(key.signer)).compute_signature(url, params)
        return Signed(
            body=urlencode(params).encode(),
            headers={"X-Twilio-Signature": signature, "I-Twilio-Idempotency-Token": event_id},
            content_type="application/x-www-form-urlencoded",
        )


def twilio_json_request(token: str, url: str, body: bytes, event_id: str) -> Signed:
    """A JSON body as Twilio signs one: ``bodySHA256`` in the URL, the URL signed alone."""
    validator = RequestValidator(token)
    query = urlencode({"bodySHA256": validator.compute_hash(body.decode())})
    signature = validator.compute_signature(f"{url}?{query}", {})
    return Signed(
        body=body,
        headers={"X-Twilio-Signature": signature, "I-Twilio-Idempotency-Token": event_id},
        query=query,
    )


class Shopify(Provider):
    def request(self, key: Key, event_id: str, *, url: str, ts: int | None = None) -> Signed:
        body = json.dumps(
            {"id": 820982911946154508, "email": "jon@example.com", "total_price": "500.00"}
        ).encode()
        return Signed(body=body, headers=shopify_headers(str(key.signer), body, event_id))


def shopify_headers(secret: str, body: bytes, webhook_id: str) -> dict[str, str]:
    return {
        "X-Shopify-Hmac-Sha256": base64.b64encode(_hmac256(secret, body)).decode(),
        "X-Shopify-Topic": "orders/create",
        "X-Shopify-Webhook-Id": webhook_id,
        "X-Shopify-Event-Id": "98880550-7158-44d4-b7cd-2c97c8a091b5",
        "X-Shopify-Triggered-At": "2026-04-15T10:12:34.123456789Z",
        "X-Shopify-Shop-Domain": "example.myshopify.com",
        "X-Shopify-API-Version": "2025-10",
    }


class Paddle(Provider):
    def new_key(self) -> Key:
        secret = "pdl_ntfset_01gkpjp8bkm3tm53kdgkx6sms7_" + secrets.token_urlsafe(24)
        return Key(secret=secret, signer=secret)

    def request(self, key: Key, event_id: str, *, url: str, ts: int | None = None) -> Signed:
        ts = _now(ts)
        body = json.dumps(
            {
                "event_id": event_id,
                "event_type": "transaction.completed",
                "occurred_at": "2026-04-15T10:12:34.567890Z",
                "notification_id": "ntf_01h8bkrfe7w1vwf8xmytwn51e7",
                "data": {"id": "txn_01h8bkrfe7w1vwf8xmytwn51e7", "total": "500"},
            }
        ).encode()
        return Signed(body=body, headers={"Paddle-Signature": paddle_header([key], body, ts)})


def paddle_header(keys: list[Key], body: bytes, ts: int) -> str:
    """Paddle's documented recipe; several ``h1`` while Paddle rotates the secret."""
    signed = f"{ts}:".encode() + body
    entries = [f"h1={_hmac256(str(k.signer), signed).hex()}" for k in keys]
    return ";".join([f"ts={ts}", *entries])


class Square(Provider):
    def new_key(self) -> Key:
        secret = secrets.token_urlsafe(16)
        return Key(secret=secret, signer=secret)

    def request(self, key: Key, event_id: str, *, url: str, ts: int | None = None) -> Signed:
        body = json.dumps(
            {
                "merchant_id": "6SSW7HV8K2ST5",
                "type": "payment.updated",
                "event_id": event_id,
                "created_at": "2026-04-15T10:12:34.123Z",
                "data": {
                    "type": "payment",
                    "id": "KkAkhdMsgzn59SM8A89WgKwekxLZY",
                    "object": {"payment": {"amount_money": {"amount": 500, "currency": "USD"}}},
                },
            }
        ).encode()
        return Signed(body=body, headers=square_headers(str(key.signer), url, body))


def square_headers(signature_key: str, url: str, body: bytes) -> dict[str, str]:
    digest = _hmac256(signature_key, url.encode() + body)
    return {"x-square-hmacsha256-signature": base64.b64encode(digest).decode()}


class SendGrid(Provider):
    def new_key(self) -> Key:
        private = ec.generate_private_key(ec.SECP256R1())
        der = private.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return Key(secret=base64.b64encode(der).decode(), signer=private)

    def event_ids(self, event_id: str) -> list[str]:
        return [event_id, f"{event_id}-open"]

    def request(self, key: Key, event_id: str, *, url: str, ts: int | None = None) -> Signed:
        ts = _now(ts)
        events = [
            {
                "email": "example@test.com",
                "timestamp": 1513299569,
                "event": "delivered",
                "sg_event_id": event_id,
                "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0",
                "response": "250 OK 500",
            },
            {
                "email": "example@test.com",
                "timestamp": 1513299600,
                "event": "open",
                "sg_event_id": f"{event_id}-open",
                "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0",
            },
        ]
        # SendGrid's own layout: one event per line inside the array.
        body = ("[" + ",\r\n".join(json.dumps(e) for e in events) + "]\r\n").encode()
        return Signed(body=body, headers=sendgrid_headers(key, body, ts))


def sendgrid_headers(key: Key, body: bytes, ts: int) -> dict[str, str]:
    assert isinstance(key.signer, ec.EllipticCurvePrivateKey)
    signature = key.signer.sign(str(ts).encode() + body, ec.ECDSA(hashes.SHA256()))
    return {
        "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
        "X-Twilio-Email-Event-Webhook-Timestamp": str(ts),
    }


PROVIDERS: list[Provider] = [
    Slack(
        "slack",
        "X-Slack-Signature",
        malformed={"X-Slack-Signature": "v1=0123456789abcdef"},
        event_type="app_mention",
    ),
    Twilio(
        "twilio",
        "X-Twilio-Signature",
        malformed={"X-Twilio-Signature": "not base64!"},
        signs_time=False,
        signs_url=True,
        event_type="message.delivered",
    ),
    Shopify(
        "shopify",
        "X-Shopify-Hmac-Sha256",
        malformed={"X-Shopify-Hmac-Sha256": "c2hvcnQ="},
        signs_time=False,
        event_type="orders/create",
    ),
    Paddle(
        "paddle",
        "Paddle-Signature",
        malformed={"Paddle-Signature": "garbage"},
        event_type="transaction.completed",
    ),
    Square(
        "square",
        "x-square-hmacsha256-signature",
        malformed={"x-square-hmacsha256-signature": "%%%"},
        signs_time=False,
        signs_url=True,
        event_type="payment.updated",
    ),
    SendGrid(
        "sendgrid",
        "X-Twilio-Email-Event-Webhook-Signature",
        malformed={"X-Twilio-Email-Event-Webhook-Timestamp": "soon"},
        event_type="delivered",
    ),
]
BY_NAME = {provider.scheme: provider for provider in PROVIDERS}
