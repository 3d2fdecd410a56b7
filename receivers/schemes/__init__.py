"""Signature schemes of inbound providers, by the name stored on ``Source.scheme``."""

from .base import (
    Challenge,
    Envelope,
    Headers,
    MalformedEnvelope,
    MalformedHeader,
    Scheme,
    SignatureMismatch,
    SignedParts,
    TimestampOutOfWindow,
    VerificationError,
    Verified,
    verify,
)
from .github import GitHubScheme
from .ours import OursScheme
from .paddle import PaddleScheme
from .sendgrid import SendGridScheme
from .shopify import ShopifyScheme
from .slack import SlackScheme
from .square import SquareScheme
from .standard import StandardScheme
from .stripe import StripeScheme
from .twilio import TwilioScheme

SCHEMES: dict[str, Scheme] = {
    scheme.name: scheme
    for scheme in (
        OursScheme(),
        StandardScheme(),
        StripeScheme(),
        GitHubScheme(),
        SlackScheme(),
        TwilioScheme(),
        ShopifyScheme(),
        PaddleScheme(),
        SquareScheme(),
        SendGridScheme(),
    )
}


def get(name: str) -> Scheme:
    return SCHEMES[name]


__all__ = [
    "SCHEMES",
    "Challenge",
    "Envelope",
    "GitHubScheme",
    "Headers",
    "MalformedEnvelope",
    "MalformedHeader",
    "OursScheme",
    "PaddleScheme",
    "Scheme",
    "SendGridScheme",
    "ShopifyScheme",
    "SignatureMismatch",
    "SignedParts",
    "SlackScheme",
    "SquareScheme",
    "StandardScheme",
    "StripeScheme",
    "TimestampOutOfWindow",
    "TwilioScheme",
    "VerificationError",
    "Verified",
    "get",
    "verify",
]
