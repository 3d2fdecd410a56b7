"""Signature schemes of inbound providers, by the name stored on ``Source.scheme``."""

from .base import (
    Envelope,
    Headers,
    MalformedEnvelope,
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
from .standard import StandardScheme
from .stripe import StripeScheme

SCHEMES: dict[str, Scheme] = {
    scheme.name: scheme
    for scheme in (OursScheme(), StandardScheme(), StripeScheme(), GitHubScheme())
}


def get(name: str) -> Scheme:
    return SCHEMES[name]


__all__ = [
    "SCHEMES",
    "Envelope",
    "GitHubScheme",
    "Headers",
    "MalformedEnvelope",
    "OursScheme",
    "Scheme",
    "SignatureMismatch",
    "SignedParts",
    "StandardScheme",
    "StripeScheme",
    "TimestampOutOfWindow",
    "VerificationError",
    "Verified",
    "get",
    "verify",
]
