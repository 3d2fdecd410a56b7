import base64
import binascii
import re
from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response

_DIGITS = re.compile(r"\A[0-9]+\Z")


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
    # Only what `next` gave out: DRF's cursors are base64 of a query string.
    cursor_format = "cursor"

    def decode_cursor(self, request: Request) -> Cursor | None:
        # A cursor the client mangled is bad input (400), not a missing page (404); and one
        # whose position is not a time must not reach the database.
        invalid = ValidationError({self.cursor_query_param: [str(self.invalid_cursor_message)]})
        given = request.query_params.getlist(self.cursor_query_param)
        if len(given) > 1 or given == [""]:
            raise invalid
        encoded = given[0] if given else None
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

    def get_page_size(self, request: Request) -> int | None:
        # DRF falls back to the default for "abc", "-5" or "null"; a client that asked for
        # something else should hear that it is wrong. Larger than the cap is the cap.
        values = request.query_params.getlist(self.page_size_query_param)
        if not values:
            return self.page_size
        digits = values[0].lstrip("0")
        if len(values) > 1 or not _DIGITS.match(values[0]) or not digits:
            raise ValidationError(
                {self.page_size_query_param: ["must be one whole number, 1 or more"]}
            )
        # No int() of a 5,000-digit number: past the cap, the length says enough.
        if len(digits) > len(str(self.max_page_size)):
            return self.max_page_size
        return min(int(digits), self.max_page_size)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": self.cursor_query_param,
                "required": False,
                "in": "query",
                "description": "Where the page starts: only the value of a previous page's "
                "`next`, as it was given out.",
                "schema": {"type": "string", "format": self.cursor_format, "minLength": 1},
            },
            {
                "name": self.page_size_query_param,
                "required": False,
                "in": "query",
                "description": f"Results per page (default {self.page_size}); more than "
                f"{self.max_page_size} are served as {self.max_page_size}.",
                "schema": {"type": "integer", "minimum": 1},
            },
        ]

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
