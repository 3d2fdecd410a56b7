"""What every URLconf of the HTTP API shares: the router, the JSON 404 for any other path
and the OpenAPI document's view. ``deliveries.api.urls`` (both sides) and
``receivers.api.urls`` (a host that only receives) are built from these."""

from typing import Any

from drf_spectacular.views import SpectacularAPIView
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter
from rest_framework.views import APIView

from webhooks_core.api.authentication import BearerTokenAuthentication
from webhooks_core.api.base import ApiDefaults
from webhooks_core.api.schema import extend_schema


class OptionalSlashRouter(SimpleRouter):
    """Routes `/api/v1/endpoints` and `/api/v1/endpoints/` alike (no redirect for POST)."""

    def __init__(self) -> None:
        super().__init__()
        self.trailing_slash = "/?"


def strip_trailing_slashes(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular renders the optional `/?` as `/`; document the canonical form,
    `/api/v1/endpoints`, as the README spells it."""
    result["paths"] = {
        (name.rstrip("/") or "/"): item for name, item in result.get("paths", {}).items()
    }
    return result


class NoSuchPath(ApiDefaults, APIView):
    """Any other path under the API: a JSON 404 (after the token check), never an HTML page.

    `/api/v1/endpoints/0.5` matches no route (ids have no dots), yet a client asked the API.
    """

    schema = None

    def http_method_not_allowed(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotFound()


class SchemaView(SpectacularAPIView):
    """The OpenAPI document: public, as before, whatever the host's DRF defaults are."""

    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [AllowAny]
    throttle_classes: list[Any] = []
    versioning_class = None

    @extend_schema(exclude=True)  # the schema does not describe itself
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


def schema_view(enum_names: dict[str, str]) -> Any:
    """The schema view of one URLconf; ``enum_names`` names the enums its models share."""
    return SchemaView.as_view(
        custom_settings={
            "TITLE": "Reliable webhooks API",
            "VERSION": "1.0.0",
            "POSTPROCESSING_HOOKS": [
                "drf_spectacular.hooks.postprocess_schema_enums",
                "webhooks_core.api.routing.strip_trailing_slashes",
                "webhooks_core.api.schema_errors.document_errors",
                "webhooks_core.api.schema.closed_request_bodies",
            ],
            # Request bodies get their own components, where a non-blank string is minLength 1.
            "COMPONENT_SPLIT_REQUEST": True,
            "ENUM_NAME_OVERRIDES": enum_names,
        }
    )
