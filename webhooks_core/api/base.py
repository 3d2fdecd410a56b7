"""What every view of our API fixes for itself, so a host's ``REST_FRAMEWORK`` settings
(written for its own API) change nothing of ours: authentication, permissions,
pagination, rendering, parsing, throttling, versioning, the schema and error handling."""

from collections.abc import Callable
from typing import Any

from drf_spectacular.openapi import AutoSchema
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer

from webhooks_core.api.authentication import BearerTokenAuthentication
from webhooks_core.api.errors import exception_handler
from webhooks_core.api.pagination import NextLinkPagination
from webhooks_core.api.parsers import SafeJSONParser


# First base class of each API view (``class X(ApiDefaults, GenericViewSet)``). No
# docstring: drf-spectacular would print it as the description of every operation.
class ApiDefaults:
    authentication_classes: Any = [BearerTokenAuthentication]
    permission_classes: Any = [IsAuthenticated]
    pagination_class: Any = NextLinkPagination
    # The API speaks JSON only; anything else is answered 415.
    parser_classes: Any = [SafeJSONParser]
    renderer_classes: Any = [JSONRenderer]
    throttle_classes: Any = []
    content_negotiation_class: Any = DefaultContentNegotiation
    versioning_class: Any = None
    filter_backends: Any = []
    schema: Any = AutoSchema()

    def get_exception_handler(self) -> Callable[..., Any]:
        return exception_handler
