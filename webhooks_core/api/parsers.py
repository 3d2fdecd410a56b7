"""Request parsing for the API: JSON only, and a hostile body is a 400, never a 500."""

import json
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from webhooks_core.jsonchecks.depth import MAX_DEPTH, too_deep

TOO_DEEP = f"JSON parse error - the document is nested more than {MAX_DEPTH} levels deep."
#: Below Python's own limit on turning digits into an int, so its error (which names
#: interpreter internals) is never what a client reads.
MAX_INT_DIGITS = 4000


def _bounded_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise ValueError(f"a number has more than {MAX_INT_DIGITS} digits")
    return int(text)


def _refuse_constant(name: str) -> None:
    raise ValueError(f"Out of range float values are not JSON compliant: {name!r}")


class SafeJSONParser(JSONParser):
    """DRF's JSON parser, plus the errors it lets through as 500s.

    ``json`` raises ``RecursionError`` (not a ``ValueError``) for deeply nested arrays or
    objects such as ``[[[[...]]]]``; that is bad input like any other malformed JSON. A
    document that parses but nests deeper than ``MAX_DEPTH`` is refused too (see
    ``webhooks_core.jsonchecks.depth``). An integer longer than ``MAX_INT_DIGITS`` is refused
    in our words.
    """

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            # DRF's JSONParser.parse, with integers bounded.
            encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
            data = json.loads(
                stream.read().decode(encoding),
                parse_constant=_refuse_constant if self.strict else None,
                parse_int=_bounded_int,
            )
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        except RecursionError:
            raise ParseError(TOO_DEEP) from None
        if too_deep(data):
            raise ParseError(TOO_DEEP)
        return data
