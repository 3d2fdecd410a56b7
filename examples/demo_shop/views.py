"""The demo's receiver: our own `/receivers/demo-shop/`, behind a deliberately flaky door.

The first request for every third event is answered 503, so a newcomer watching the
admin sees a retry with backoff, and then the success. Every other request goes straight
to the real receiving view (signature check, inbox, 200).
"""

import threading
import zlib

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from receivers.views import receive

from .handlers import DEMO_SOURCE

_refused_once: set[str] = set()
_lock = threading.Lock()


def _refuse_first_try(event_id: str) -> bool:
    if zlib.crc32(event_id.encode()) % 3:
        return False
    with _lock:
        if event_id in _refused_once:
            return False
        _refused_once.add(event_id)
        return True


@csrf_exempt
def flaky_receiver(request: HttpRequest) -> HttpResponse:
    event_id = request.headers.get("X-Webhook-Id", "")
    if request.method == "POST" and event_id and _refuse_first_try(event_id):
        return JsonResponse({"detail": "demo: failing the first try on purpose"}, status=503)
    return receive(request, DEMO_SOURCE)
