"""An endpoint's subscription and signature options: payload filter, signature scheme,
envelope, and the ed25519 key pairs a ``v1a`` scheme signs with.

The key pairs rotate like the HMAC secrets: a new pair is added and the old ones keep
signing until their grace period ends, so a consumer can switch to the new public key
without a window in which its verification fails.
"""

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from deliveries.models import Endpoint, EndpointSigningKey
from deliveries.pipeline import payload_filters, rendering
from webhooks_core.crypto import signing

DEFAULT_KEY_ROTATION_GRACE_SECONDS = 24 * 3600


class NoSigningKeys(ValueError):
    """The endpoint's signature scheme has no v1a: a key pair would sign nothing."""


def options_problems(changes: dict[str, Any]) -> dict[str, list[str]]:
    """What is wrong with the option fields among ``changes`` ({field: [message]})."""
    errors: dict[str, list[str]] = {}
    if "filter" in changes:
        try:
            payload_filters.validate(changes["filter"])
        except payload_filters.FilterError as exc:
            errors["filter"] = [str(exc)]
    if "signature_scheme" in changes and changes["signature_scheme"] not in signing.SCHEMES:
        allowed = ", ".join(f'"{s}"' for s in signing.SCHEMES)
        errors["signature_scheme"] = [f"Must be one of {allowed}."]
    if "envelope" in changes and changes["envelope"] not in rendering.ENVELOPES:
        allowed = ", ".join(f'"{e}"' for e in rendering.ENVELOPES)
        errors["envelope"] = [f"Must be one of {allowed}."]
    return errors


def normalised_filter(document: Any) -> Any:
    """``{}`` filters nothing: stored as NULL, the same as no filter."""
    return document or None


def uses_v1a(endpoint: Endpoint) -> bool:
    return endpoint.signature_scheme in (signing.SCHEME_V1A, signing.SCHEME_BOTH)


def endpoint_ensure_signing_key(*, endpoint: Endpoint) -> None:
    """Give a v1a endpoint its first key pair if it has no unexpired one."""
    if uses_v1a(endpoint) and not endpoint.signing_keys.unexpired(timezone.now()).exists():
        _add_signing_key(endpoint)


def _add_signing_key(endpoint: Endpoint) -> EndpointSigningKey:
    private, _ = signing.generate_key_pair()
    key = EndpointSigningKey(endpoint=endpoint)
    key.value = private
    key.save()
    return key


def endpoint_public_key(*, endpoint: Endpoint) -> str | None:
    """The newest unexpired public key (what the API shows as ``public_key``), or None."""
    key = (
        endpoint.signing_keys.unexpired(timezone.now())
        .order_by("-created_at", "-pk")
        .only("public_key")
        .first()
    )
    return key.public_key if key else None


@transaction.atomic
def endpoint_rotate_signing_key(
    *, endpoint: Endpoint, grace_seconds: int = DEFAULT_KEY_ROTATION_GRACE_SECONDS
) -> EndpointSigningKey:
    """Add a new key pair; the current ones keep signing until the grace period ends.

    Returns the new key's row (its ``public_key`` is for the consumer; the private key
    never leaves the database). With ``grace_seconds=0`` the old keys stop at once.
    Raises `NoSigningKeys` when the endpoint's scheme has no v1a.
    """
    if not uses_v1a(endpoint):
        raise NoSigningKeys('set signature_scheme to "v1a" or "v1,v1a" first')
    now = timezone.now()
    expires_at = now + timedelta(seconds=grace_seconds)
    endpoint.signing_keys.expire_by(expires_at, now)
    return _add_signing_key(endpoint)
