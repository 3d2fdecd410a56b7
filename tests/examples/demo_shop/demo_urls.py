"""The reference deployment's URLs with the demo's, as `serve` (DEBUG on) mounts them: the
tests run with DEBUG off, where a deployment does not answer on /demo/."""

from django.urls import include, path

from webhooks_project.urls import urlpatterns as deployment

urlpatterns = [*deployment, path("demo/", include("examples.demo_shop.urls"))]
