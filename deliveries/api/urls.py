from typing import Any

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter
from rest_framework.views import APIView

from receivers.api import views as receivers_views

from . import replays, tenants, views
from .authentication import BearerTokenAuthentication
from .base import ApiDefaults
from .event_types import EventTypeList
from .portal import PortalSessionCreate
from .schema import extend_schema

app_name = "api"


class OptionalSlashRouter(SimpleRouter):
    """Routes `/api/v1/endpoints` and `/api/v1/endpoints/` alike (no redirect for POST)."""

    def __init__(self) -> None:
        super().__init__()
        self.trailing_slash = "/?"


def strip_trailing_slashes(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular renders the optional `/?` as `/`; document the canonical form,
    `/api/v1/endpoints`, as the issue and the README spell it."""
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


router = OptionalSlashRouter()
router.register("endpoints", views.EndpointViewSet, basename="endpoint")
router.register("events", views.EventViewSet, basename="event")
router.register("deliveries", views.DeliveryViewSet, basename="delivery")
router.register("replays", replays.ReplayViewSet, basename="replay")
router.register("sources", receivers_views.SourceViewSet, basename="source")
router.register("inbox", receivers_views.InboxViewSet, basename="inbox-event")


class SchemaView(SpectacularAPIView):
    """The OpenAPI document: public, as before, whatever the host's DRF defaults are."""

    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [AllowAny]
    throttle_classes: list[Any] = []
    versioning_class = None
    custom_settings = {
        "TITLE": "Reliable webhooks API",
        "VERSION": "1.0.0",
        "POSTPROCESSING_HOOKS": [
            "drf_spectacular.hooks.postprocess_schema_enums",
            "deliveries.api.urls.strip_trailing_slashes",
            "webhooks_core.api.schema_errors.document_errors",
            "webhooks_core.api.schema.closed_request_bodies",
        ],
        # Request bodies get their own components, where a non-blank string is minLength 1.
        "COMPONENT_SPLIT_REQUEST": True,
        "ENUM_NAME_OVERRIDES": {
            "DeliveryStatusEnum": "deliveries.models.DeliveryStatus",
            "InboxStatusEnum": "receivers.models.InboxStatus",
        },
    }

    @extend_schema(exclude=True)  # the schema does not describe itself
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


schema_view = SchemaView.as_view()

urlpatterns = [
    re_path(r"^schema/?$", schema_view, name="schema"),
    re_path(r"^event-types/?$", EventTypeList.as_view(), name="event-types"),
    re_path(r"^portal-sessions/?$", PortalSessionCreate.as_view(), name="portal-sessions"),
    re_path(
        rf"^tenants/{tenants.TENANT_PATH}/settings/?$",
        tenants.TenantSettingsView.as_view(),
        name="tenant-settings",
    ),
    re_path(rf"^tenants/{tenants.TENANT_PATH}/?$", tenants.TenantErase.as_view(), name="tenant"),
    re_path(r"^erasures/(?P<pk>[0-9]+)/?$", tenants.ErasureDetail.as_view(), name="erasure"),
    path("", include(router.urls)),
    re_path(r"^", NoSuchPath.as_view(http_method_names=[]), name="no-such-path"),
]
