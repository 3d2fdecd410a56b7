"""Every API error is JSON with a clear message; nothing leaks a stack trace."""

import logging
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from webhooks_core import unavailable

logger = logging.getLogger(__name__)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        exc = exceptions.ValidationError(detail)
    elif isinstance(exc, ObjectDoesNotExist):
        exc = Http404()
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
