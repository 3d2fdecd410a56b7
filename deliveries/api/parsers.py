"""Request parsing for the API: JSON only, and a hostile body is a 400, never a 500."""

from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class SafeJSONParser(JSONParser):
    """DRF's JSON parser, plus the errors it lets through as 500s.

    ``json`` raises ``RecursionError`` (not a ``ValueError``) for deeply nested arrays or
    objects such as ``[[[[...]]]]``; that is bad input like any other malformed JSON.
    """

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply.") from None
