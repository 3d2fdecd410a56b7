"""Stripe: ``Stripe-Signature: t=<ts>,v1=<hex>[,v1=...][,v0=...]``.

The signature is the same recipe as ours (HMAC-SHA256 with the ``whsec_`` secret as given,
over ``"<ts>.<raw body>"``); only the header name and the event body differ. The body
carries ``livemode`` and, for Connect, ``account``: the pipeline compares them with the
source's expected mode and account.
"""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from receivers.schemes.base import Envelope, Headers, SignedParts, from_unix
from receivers.schemes.ours import OursScheme


class StripeScheme(OursScheme):
    name = "stripe"
    label = "Stripe (Stripe-Signature)"
    generates_secrets = False  # Stripe shows the secret; ours would verify nothing
    signature_header = "Stripe-Signature"
    signature_headers = ("Stripe-Signature",)

    def envelope(self, headers: Headers, body: bytes, parts: SignedParts) -> Envelope:
        envelope = super().envelope(headers, body, parts)
        data = envelope.payload
        livemode = data.get("livemode")
        mode = "live" if livemode is True else "test" if livemode is False else ""
        account = data.get("account")
        return Envelope(
            event_id=envelope.event_id,
            type=envelope.type,
            payload=data,
            provider_timestamp=envelope.provider_timestamp,
            account=account if isinstance(account, str) else "",
            mode=mode,
        )

    def provider_timestamp(self, data: Mapping[str, Any], parts: SignedParts) -> datetime | None:
        return from_unix(data.get("created"))
