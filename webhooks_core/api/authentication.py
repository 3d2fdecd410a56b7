"""Bearer-token authentication for the HTTP API (tokens are stored as SHA-256 hashes)."""

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from webhooks_core.models import ApiToken, hash_api_token

LAST_USED_PRECISION = timedelta(minutes=1)
# A host's WSGI layer may authenticate a request before reading its body (the reference
# deployment does: webhooks_project/bodies.py) and keep the result in the request's
# environ under this key, as (Authorization header, time.monotonic(), result). The view
# then takes it instead of looking the token up again, if it was made for the same header
# this recently: a body that took longer to arrive is checked again (a token revoked
# meanwhile is refused). A client cannot set the key: the server puts headers under HTTP_.
AUTHENTICATED_ENVIRON_KEY = "webhooks.bearer_authentication"
AUTHENTICATED_REUSE_SECONDS = 1.0


@dataclass(frozen=True)
class TokenPrincipal:
    """The caller of an API request: a token, not a Django user."""

    token_id: int
    name: str
    # The tenant the token is limited to (webhooks_core/api/scoping.py); None: every tenant.
    tenant: str | None = None
    is_authenticated: bool = True
    is_anonymous: bool = False


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[TokenPrincipal, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        kept = request.META.get(AUTHENTICATED_ENVIRON_KEY)
        if (
            kept is not None
            and kept[0] == header
            and time.monotonic() - kept[1] < AUTHENTICATED_REUSE_SECONDS
        ):
            reused: tuple[TokenPrincipal, ApiToken] = kept[2]
            return reused
        keyword, _, plain = header.partition(" ")
        if keyword.lower() != self.keyword.lower() or not plain.strip():
            raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <token>'.")
        token = ApiToken.objects.filter(
            token_hash=hash_api_token(plain.strip()), revoked_at__isnull=True
        ).first()
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_PRECISION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return TokenPrincipal(token_id=token.pk, name=token.name, tenant=token.tenant), token

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (with WWW-Authenticate) rather than 403 without a token.
        return self.keyword


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Documents the bearer token in the OpenAPI schema."""

    target_class = BearerTokenAuthentication
    name = "BearerToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token from `python manage.py create_api_token <name>` "
            "(`--tenant <T>`: limited to tenant T's endpoints, events, deliveries, replays "
            "and portal sessions).",
        }
