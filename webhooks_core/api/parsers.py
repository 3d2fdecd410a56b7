"""Request parsing for the API: JSON only, and a hostile body is a 400, never a 500."""

from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from ..jsondepth import MAX_DEPTH, too_deep

TOO_DEEP = f"JSON parse error - the document is nested more than {MAX_DEPTH} levels deep."


class SafeJSONParser(JSONParser):
    """DRF's JSON parser, plus the errors it lets through as 500s.

    ``json`` raises ``RecursionError`` (not a ``ValueError``) for deeply nested arrays or
    objects such as ``[[[[...]]]]``; that is bad input like any other malformed JSON. A
    document that parses but nests deeper than ``MAX_DEPTH`` is refused too (see
    ``webhooks_core.jsondepth``).
    """

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(TOO_DEEP) from None
        if too_deep(data):
            raise ParseError(TOO_DEEP)
        return data
