from django.urls import path

from receivers import views

app_name = "receivers"
urlpatterns = [
    path("<slug:slug>/", views.receive, name="receive"),
    # Without the trailing slash too: a POST cannot follow APPEND_SLASH's redirect.
    path("<slug:slug>", views.receive, name="receive-no-slash"),
]
