"""The receiving side's HTTP API, for a host that only receives:
``path("api/v1/", include("receivers.api.urls"))``. Where both sides are installed,
``deliveries.api.urls`` serves these routes beside its own (``routes``)."""

from django.urls import include, path, re_path

from receivers.api import views
from webhooks_core.api.routing import NoSuchPath, OptionalSlashRouter, schema_view

app_name = "api"

router = OptionalSlashRouter()
router.register("sources", views.SourceViewSet, basename="source")
router.register("inbox", views.InboxViewSet, basename="inbox-event")

#: The receiving API's routes, without the schema and the catch-all 404.
routes = router.urls

ENUM_NAMES = {"InboxStatusEnum": "receivers.models.InboxStatus"}

urlpatterns = [
    re_path(r"^schema/?$", schema_view(ENUM_NAMES), name="schema"),
    path("", include(routes)),
    re_path(r"^", NoSuchPath.as_view(http_method_names=[]), name="no-such-path"),
]
