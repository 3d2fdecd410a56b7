"""The project's URLs plus ``/bench/noop``, a trivial Django view, and ``/bench/write``, the
writing view (`bench.anchor`): the references the ingest doors are compared with, behind
the same server, middleware and settings."""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from bench.anchor import write
from webhooks_project.urls import urlpatterns as project_urlpatterns


@csrf_exempt
def noop(request: HttpRequest) -> HttpResponse:
    request.read()  # read the body, as a webhook view must
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("bench/noop", noop, name="bench-noop"),
    path("bench/write", write, name="bench-write"),
    *project_urlpatterns,
]
