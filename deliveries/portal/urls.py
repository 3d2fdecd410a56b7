"""The portal's URLconf: ``path("portal/", include("deliveries.portal.urls"))``."""

from django.urls import path

from deliveries.portal import views

app_name = "webhooks_portal"

urlpatterns = [
    path("", views.home, name="home"),
    path("open/<str:token>", views.open_link, name="open"),
    path("sign-out", views.sign_out, name="sign-out"),
    path("endpoints/new", views.endpoint_add, name="endpoint-add"),
    path("endpoints/<uuid:pk>/", views.endpoint_detail, name="endpoint"),
    path("endpoints/<uuid:pk>/edit", views.endpoint_edit, name="endpoint-edit"),
    path("endpoints/<uuid:pk>/state", views.endpoint_state, name="endpoint-state"),
    path("endpoints/<uuid:pk>/delete", views.endpoint_delete, name="endpoint-delete"),
    path("endpoints/<uuid:pk>/secret", views.endpoint_secret, name="endpoint-secret"),
    path("endpoints/<uuid:pk>/rotate", views.endpoint_rotate, name="endpoint-rotate"),
    path("endpoints/<uuid:pk>/poll-key", views.endpoint_poll_key, name="endpoint-poll-key"),
    path("endpoints/<uuid:pk>/test", views.endpoint_test, name="endpoint-test"),
    path("endpoints/<uuid:pk>/validate", views.endpoint_check, name="endpoint-validate"),
    path("deliveries/", views.delivery_list, name="deliveries"),
    path("deliveries/<int:pk>/", views.delivery_detail, name="delivery"),
    path("deliveries/<int:pk>/retry", views.delivery_retry, name="delivery-retry"),
    path("recover", views.recover, name="recover"),
    path("event-types", views.event_types, name="event-types"),
]
