"""Building signed requests the way each provider (or its official library) does."""

import hashlib
import hmac
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import stripe
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from receivers.models import InboxEvent, Source
from webhooks_core.crypto import signing


def body_of(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def ours_event(
    event_type: str = "payment.succeeded",
    data: dict[str, Any] | None = None,
    event_id: str | None = None,
    **extra: Any,
) -> bytes:
    return body_of(
        {
            "id": event_id or str(uuid.uuid4()),
            "type": event_type,
            "version": 1,
            "occurred_at": "2026-04-15T10:12:34Z",
            "data": data or {},
            **extra,
        }
    )


def sign_ours(secrets: list[str], body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """Headers exactly as our sender builds them (webhooks_core.crypto.signing)."""
    ts = int(time.time()) if timestamp is None else timestamp
    try:
        msg_id = json.loads(body).get("id", "x")
    except (ValueError, AttributeError, RecursionError):
        msg_id = "x"
    headers = signing.signature_headers(secrets, msg_id=str(msg_id), timestamp=ts, body=body)
    return {**headers, "X-Webhook-Id": str(msg_id), "X-Webhook-Timestamp": str(ts)}


def sign_standard_lib(
    secret: str, body: bytes, msg_id: str, timestamp: int | None = None, prefix: str = "webhook"
) -> dict[str, str]:
    """Signed by the official ``standardwebhooks`` library."""
    ts = int(time.time()) if timestamp is None else timestamp
    signature = Webhook(secret).sign(msg_id, datetime.fromtimestamp(ts, tz=UTC), body.decode())
    return {
        f"{prefix}-id": msg_id,
        f"{prefix}-timestamp": str(ts),
        f"{prefix}-signature": signature,
    }


def sign_stripe_lib(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """Signed by the official ``stripe`` library."""
    header = stripe.WebhookSignature.generate_signature_header(
        body.decode(), secret, timestamp=timestamp
    )
    return {"Stripe-Signature": header}


def sign_github(
    secret: str, body: bytes, event: str = "push", delivery: str | None = None
) -> dict[str, str]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {
        "X-Hub-Signature-256": f"sha256={digest}",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
    }


def row(source: Source, status: str, age_days: float = 0, **fields: Any) -> InboxEvent:
    received = timezone.now() - timedelta(days=age_days)
    return InboxEvent.objects.create(
        source=source,
        event_id=f"e{InboxEvent.objects.count()}",
        type="t",
        status=status,
        raw_body=b"{}",
        payload={},
        received_at=received,
        next_attempt_at=fields.pop("next_attempt_at", received),
        **fields,
    )
