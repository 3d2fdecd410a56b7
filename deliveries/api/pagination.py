import base64
import binascii
from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response


class NextLinkPagination(CursorPagination):
    """Lists answer ``{"results": [...], "next": <url or null>}``.

    A cursor stays correct while new rows arrive, and costs the same on page 1,000 as on
    page 1, unlike an offset.
    """

    ordering = ("-created_at", "-pk")
    # Our own, not the host's REST_FRAMEWORK["PAGE_SIZE"].
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 500

    def decode_cursor(self, request: Request) -> Cursor | None:
        # A cursor the client mangled is bad input (400), not a missing page (404); and one
        # whose position is not a time must not reach the database.
        invalid = ValidationError({self.cursor_query_param: [str(self.invalid_cursor_message)]})
        encoded = request.query_params.get(self.cursor_query_param)
        try:
            if encoded is not None:
                # DRF's decoder skips characters outside the alphabet, so "%%%" would be
                # taken for the first page; a cursor is only ever what `next` gave out.
                base64.b64decode(encoded.encode("ascii"), validate=True)
            cursor = super().decode_cursor(request)
        except (NotFound, UnicodeError, binascii.Error):
            raise invalid from None
        if cursor is not None and cursor.position is not None:
            try:
                position = parse_datetime(str(cursor.position))
            except ValueError:
                position = None
            if position is None:
                raise invalid
        return cursor

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"results": data, "next": self.get_next_link()})

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["results", "next"],
            "properties": {
                "results": schema,
                "next": {"type": "string", "nullable": True, "format": "uri"},
            },
        }
