from django.urls import URLPattern

app_name = "receivers"
urlpatterns: list[URLPattern] = []
