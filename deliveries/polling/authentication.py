"""The consumer API's authentication: the endpoint's poll key, nothing else.

An API token (an operator's or a tenant's) is refused here with 403, and a poll key is
refused by every other view (they look keys up among API tokens only)."""

from dataclasses import dataclass
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from deliveries.models import Endpoint
from deliveries.polling import keys


@dataclass(frozen=True)
class PollKeyPrincipal:
    """The caller of the consumer API: the holder of one endpoint's key."""

    endpoint_id: Any
    key_hash: str
    is_authenticated: bool = True
    is_anonymous: bool = False


class PollKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[PollKeyPrincipal, Endpoint] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        keyword, _, plain = header.partition(" ")
        plain = plain.strip()
        if keyword.lower() != self.keyword.lower() or not plain:
            raise exceptions.AuthenticationFailed(
                f"Use 'Authorization: Bearer {keys.PREFIX}…' (the endpoint's poll key)."
            )
        if not keys.looks_like_key(plain):
            raise exceptions.PermissionDenied(
                f"This API takes an endpoint's poll key ({keys.PREFIX}…), not an API token."
            )
        endpoint = keys.endpoint_of_key(plain)
        if endpoint is None:
            raise exceptions.AuthenticationFailed("Invalid or rotated poll key.")
        return PollKeyPrincipal(endpoint.pk, keys.key_hash(plain)), endpoint

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class PollKeyScheme(OpenApiAuthenticationExtension):
    target_class = PollKeyAuthentication
    name = "PollKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": f"An endpoint's poll key ({keys.PREFIX}…), shown when a polling "
            "endpoint is created and by `POST /api/v1/endpoints/{id}/rotate-poll-key`.",
        }
