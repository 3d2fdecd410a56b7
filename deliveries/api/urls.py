from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import SimpleRouter

from . import views

app_name = "api"


class OptionalSlashRouter(SimpleRouter):
    """Routes `/api/v1/endpoints` and `/api/v1/endpoints/` alike (no redirect for POST)."""

    def __init__(self) -> None:
        super().__init__()
        self.trailing_slash = "/?"


router = OptionalSlashRouter()
router.register("endpoints", views.EndpointViewSet, basename="endpoint")
router.register("events", views.EventViewSet, basename="event")
router.register("deliveries", views.DeliveryViewSet, basename="delivery")

urlpatterns = [
    path("schema", SpectacularAPIView.as_view(), name="schema"),
    path("", include(router.urls)),
]
