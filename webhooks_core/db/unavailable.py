"""503 instead of 500 while the database is unreachable.

A 500 tells a client that its request is wrong or that we have a bug; an outage of
PostgreSQL is neither. Nothing was stored, so the honest answer is "try again later",
with the same JSON shape as our other errors and no stack trace.
"""

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

logger = logging.getLogger(__name__)

DATABASE_ERRORS = (OperationalError, InterfaceError)
RETRY_AFTER_SECONDS = 30
DETAIL = "Temporarily unavailable; nothing was stored. Try again later."


def is_database_outage(exc: BaseException) -> bool:
    return isinstance(exc, DATABASE_ERRORS)


def database_unavailable_response() -> JsonResponse:
    response = JsonResponse({"detail": DETAIL}, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class DatabaseUnavailableMiddleware:
    """Turns a database outage raised by any view (admin, dashboard, demo) into a 503.

    The API's exception handler and the receiving view answer the same way on their own,
    because DRF and the receiver catch exceptions before middleware sees them.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_database_outage(exception):
            return None
        logger.warning("database unavailable: answered 503", extra={"path": request.path})
        return database_unavailable_response()
