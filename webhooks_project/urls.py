from django.contrib import admin
from django.urls import include, path

from deliveries.admin_catalogue import event_types_page

from . import dashboard, health, metrics

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/event-types/", event_types_page, name="admin-event-types"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("admin/dashboard/", dashboard.dashboard, name="webhooks-dashboard"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("deliveries.api.urls")),
    path("receivers/", include("receivers.urls")),
    path("portal/", include("deliveries.portal.urls")),
    path("demo/", include("demo_shop.urls")),
]
