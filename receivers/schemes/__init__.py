"""Signature schemes of inbound providers, by the name stored on ``Source.scheme``."""

from .base import (
    MAX_SIGNATURES,
    Envelope,
    Headers,
    MalformedEnvelope,
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
from .standard import StandardScheme
from .stripe import StripeScheme

SCHEMES: dict[str, Scheme] = {
    scheme.name: scheme
    for scheme in (OursScheme(), StandardScheme(), StripeScheme(), GitHubScheme())
}


def get(name: str) -> Scheme:
    return SCHEMES[name]


__all__ = [
    "MAX_SIGNATURES",
    "SCHEMES",
    "Envelope",
    "GitHubScheme",
    "Headers",
    "MalformedEnvelope",
    "MalformedSignature",
    "OursScheme",
    "Scheme",
    "SignatureMismatch",
    "SignedParts",
    "StandardScheme",
    "StripeScheme",
    "TimestampOutOfWindow",
    "TooManySignatures",
    "VerificationError",
    "Verified",
    "get",
    "screen",
    "secret_refusal",
    "verify",
]
