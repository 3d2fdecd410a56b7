"""The consumer's key (``whpoll_…``): issued once, stored as its SHA-256 on the endpoint,
like API tokens. A polling endpoint's key reads its feed; a push endpoint given one reads
its catch-up feed. It opens nothing else (the API's other views take API tokens only)."""

import secrets
from uuid import UUID

from django.utils import timezone

from deliveries.models import Endpoint
from webhooks_core.models import hash_api_token

PREFIX = "whpoll_"
KEY_BYTES = 32


def looks_like_key(text: str) -> bool:
    return text.startswith(PREFIX)


def key_hash(key: str) -> str:
    return hash_api_token(key)


def endpoint_issue_poll_key(*, endpoint_id: UUID | str) -> str:
    """A new key for the endpoint, returned once; the previous one stops working."""
    key = PREFIX + secrets.token_urlsafe(KEY_BYTES)
    changed = Endpoint.objects.filter(pk=endpoint_id).update(
        poll_key_hash=key_hash(key), poll_key_created_at=timezone.now()
    )
    if not changed:
        raise Endpoint.DoesNotExist(f"no endpoint {endpoint_id}")
    return key


def endpoint_of_key(key: str) -> Endpoint | None:
    """The endpoint this key reads, or None."""
    if not looks_like_key(key):
        return None
    return Endpoint.objects.filter(poll_key_hash=key_hash(key)).first()
