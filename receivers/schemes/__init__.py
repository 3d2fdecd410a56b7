"""Signature schemes of inbound providers, by the name stored on ``Source.scheme``."""

from .base import (
    MAX_SIGNATURES,
    Challenge,
    Envelope,
    Headers,
    MalformedEnvelope,
    MalformedHeader,
    MalformedSignature,
    Scheme,
    SignatureMismatch,
    SignedParts,
    TimestampOutOfWindow,
    TooManySignatures,
    VerificationError,
    Verified,
    screen,
    secret_refusal,
    verify,
)
from .github import GitHubScheme
from .ours import OursScheme
from .paddle import PaddleScheme
from .registry import Registry, choices
from .sendgrid import SendGridScheme
from .shopify import ShopifyScheme
from .slack import SlackScheme
from .square import SquareScheme
from .standard import StandardScheme
from .stripe import StripeScheme
from .twilio import TwilioScheme

#: Every scheme a source may name: the built-in ones and those of ``RECEIVERS_SCHEMES``.
SCHEMES: Registry = Registry()


def get(name: str) -> Scheme:
    """The scheme named ``name``; ``KeyError`` if none is registered under it."""
    return SCHEMES[name]


__all__ = [
    "MAX_SIGNATURES",
    "SCHEMES",
    "Challenge",
    "Envelope",
    "GitHubScheme",
    "Headers",
    "MalformedEnvelope",
    "MalformedHeader",
    "MalformedSignature",
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
    "TooManySignatures",
    "TwilioScheme",
    "VerificationError",
    "Verified",
    "choices",
    "get",
    "screen",
    "secret_refusal",
    "verify",
]
