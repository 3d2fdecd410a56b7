"""The HTTP API of the sending side, and of the receiving side too where ``receivers`` is
installed (one URLconf for both, as before: ``path("api/v1/", include("deliveries.api.urls"))``)."""

from typing import Any

from django.apps import apps
from django.urls import include, path, re_path

from deliveries.api import replays, tenants, views
from deliveries.api.event_types import EventTypeList
from deliveries.api.portal import PortalSessionCreate
from webhooks_core.api.routing import NoSuchPath, OptionalSlashRouter, schema_view

app_name = "api"

router = OptionalSlashRouter()
router.register("endpoints", views.EndpointViewSet, basename="endpoint")
router.register("events", views.EventViewSet, basename="event")
router.register("deliveries", views.DeliveryViewSet, basename="delivery")
router.register("replays", replays.ReplayViewSet, basename="replay")

enum_names = {"DeliveryStatusEnum": "deliveries.models.DeliveryStatus"}
receiving: list[Any] = []
if apps.is_installed("receivers"):
    from receivers.api import urls as receivers_urls

    receiving = receivers_urls.routes
    enum_names.update(receivers_urls.ENUM_NAMES)

urlpatterns = [
    re_path(r"^schema/?$", schema_view(enum_names), name="schema"),
    re_path(r"^event-types/?$", EventTypeList.as_view(), name="event-types"),
    re_path(r"^portal-sessions/?$", PortalSessionCreate.as_view(), name="portal-sessions"),
    re_path(
        rf"^tenants/{tenants.TENANT_PATH}/settings/?$",
        tenants.TenantSettingsView.as_view(),
        name="tenant-settings",
    ),
    re_path(rf"^tenants/{tenants.TENANT_PATH}/?$", tenants.TenantErase.as_view(), name="tenant"),
    re_path(r"^erasures/(?P<pk>[0-9]+)/?$", tenants.ErasureDetail.as_view(), name="erasure"),
    path("poll/", include("deliveries.polling.urls")),
    path("", include(router.urls)),
    path("", include(receiving)),
    re_path(r"^", NoSuchPath.as_view(http_method_names=[]), name="no-such-path"),
]
