"""Liveness and readiness: mount ``healthz`` and ``readyz`` in the host's URLconf.

/healthz answers as long as the process serves requests. /readyz also checks that the
database and the broker answer, so a load balancer stops sending traffic to an instance
that could not persist an event.
"""

from celery import current_app as celery_app
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

BROKER_TIMEOUT_SECONDS = 2


def database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:
        return False


def broker_ok() -> bool:
    try:
        with celery_app.connection_for_write() as conn:
            # Opening the Redis transport's channel sends a PING, so this is a round trip.
            conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_SECONDS)
        return True
    except Exception:
        return False


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks = {"database": database_ok(), "broker": broker_ok()}
    failed = sorted(name for name, ok in checks.items() if not ok)
    body = {"status": "ok" if not failed else "unavailable", "checks": checks, "failed": failed}
    return JsonResponse(body, status=200 if not failed else 503)
