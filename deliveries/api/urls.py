from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import SimpleRouter

from . import views

app_name = "api"

# "/?" accepts paths with and without the trailing slash.
router = SimpleRouter(trailing_slash="/?")  # type: ignore[arg-type]
router.register("endpoints", views.EndpointViewSet, basename="endpoint")
router.register("events", views.EventViewSet, basename="event")
router.register("deliveries", views.DeliveryViewSet, basename="delivery")

urlpatterns = [
    path("schema", SpectacularAPIView.as_view(), name="schema"),
    path("", include(router.urls)),
]
