"""Every API error is JSON with a clear message; nothing leaks a stack trace."""

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist, RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from webhooks_core.db import unavailable

logger = logging.getLogger(__name__)


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"


def body_too_large() -> PayloadTooLarge:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return PayloadTooLarge(
        f"The request body is larger than {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)."
    )


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        exc = exceptions.ValidationError(detail)
    elif isinstance(exc, ObjectDoesNotExist):
        exc = Http404()
    elif isinstance(exc, RequestDataTooBig):
        # Django refuses to read it; a client's mistake, not a 500 with a traceback.
        exc = body_too_large()
    elif isinstance(exc, SuspiciousOperation):  # too many form fields and the like
        exc = exceptions.ParseError(str(exc))
    response = drf_exception_handler(exc, context)
    if response is not None:
        return response
    if unavailable.is_database_outage(exc):
        logger.warning("database unavailable: API answered 503")
        return Response(
            {"detail": unavailable.DETAIL},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(unavailable.RETRY_AFTER_SECONDS)},
        )
    logger.exception("unhandled API error", exc_info=exc)
    return Response(
        {"detail": "Internal error; it has been logged."},
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )
