"""Actions both APIs share, written once."""

from collections.abc import Callable
from typing import Any

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from webhooks_core.api.strict import refuse_body


def retry_response(
    request: Request,
    row: Any,
    *,
    retry: Callable[[Any], Any],
    not_retryable: type[Exception],
    serializer: type[BaseSerializer[Any]],
) -> Response:
    """``POST …/{id}/retry`` (a delivery, an inbox event): no body; the service retries the
    row by its id and answers ``202`` with the row as it is now, or ``409`` naming why the
    row cannot be retried (its state), never a half-done retry."""
    refuse_body(request.data)
    try:
        retried = retry(row.pk)
    except not_retryable as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    return Response(serializer(retried).data, status=status.HTTP_202_ACCEPTED)
