"""Signature schemes of inbound providers, by the name stored on ``Source.scheme``."""

from receivers.schemes.base import (
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
from receivers.schemes.github import GitHubScheme
from receivers.schemes.ours import OursScheme
from receivers.schemes.paddle import PaddleScheme
from receivers.schemes.registry import Registry, choices
from receivers.schemes.sendgrid import SendGridScheme
from receivers.schemes.shopify import ShopifyScheme
from receivers.schemes.slack import SlackScheme
from receivers.schemes.square import SquareScheme
from receivers.schemes.standard import StandardScheme
from receivers.schemes.stripe import StripeScheme
from receivers.schemes.twilio import TwilioScheme

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
