from django.conf import settings
from django.contrib import admin
from django.urls import include, path

from deliveries.admin.catalogue import event_types_page
from deliveries.dashboard.views import dashboard
from webhooks_core.web.liveness import healthz, readyz
from webhooks_core.web.metrics import metrics_view

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("admin/event-types/", event_types_page, name="admin-event-types"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/dashboard/", dashboard, name="webhooks-dashboard"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("deliveries.api.urls")),
    path("receivers/", include("receivers.urls")),
    path("portal/", include("deliveries.portal.urls")),
    # The demo shop's receiver runs with the demo only (`serve`, DEBUG on): a deployment
    # does not answer on it.
    *([path("demo/", include("examples.demo_shop.urls"))] if settings.DEBUG else []),
]
