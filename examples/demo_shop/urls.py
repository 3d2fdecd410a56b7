from django.urls import path

from . import views

app_name = "demo_shop"
urlpatterns = [path("receiver/", views.flaky_receiver, name="receiver")]
