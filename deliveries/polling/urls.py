"""The consumer API's routes, under the API's ``poll/`` (deliveries/api/urls.py)."""

from django.urls import re_path

from deliveries.polling import views

_ENDPOINT = r"(?P<endpoint_id>[0-9a-fA-F-]{36})"
_NAME = r"(?P<name>[^/]{1,200})"

urlpatterns = [
    re_path(rf"^{_ENDPOINT}/?$", views.FeedView.as_view(), name="poll"),
    re_path(
        rf"^{_ENDPOINT}/consumers/{_NAME}/commit/?$",
        views.CommitView.as_view(),
        name="poll-consumer-commit",
    ),
    re_path(
        rf"^{_ENDPOINT}/consumers/{_NAME}/seek/?$",
        views.SeekView.as_view(),
        name="poll-consumer-seek",
    ),
    re_path(
        rf"^{_ENDPOINT}/consumers/{_NAME}/?$", views.ConsumerView.as_view(), name="poll-consumer"
    ),
]
