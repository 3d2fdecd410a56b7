"""Requests Django cannot serve are a 400 with the reason, before any view runs.

Two kinds of input reach deep into Django and end as a 500 with a long traceback, though
they are only a client's mistake:

* a NUL character in a query parameter (``/admin/deliveries/event/?type=%00``): the admin's
  list filters and search pass it to PostgreSQL, which refuses NUL in text;
* a ``charset`` that is not a text encoding Python knows (``rot13``, ``base64``,
  ``nonsense``): decoding the query string or the form body raises ``LookupError``. A form
  body in any charset but UTF-8 is refused too (the form encoding has no other).

Checking once here covers every URL: the admin, the API, the receivers and the host's own
views. The API's views are left to check their query parameters themselves: they answer a
400 that names the field (and ignore parameters they do not know).

Add ``webhooks_core.web.middleware.BadRequestMiddleware`` near the top of ``MIDDLEWARE``.
"""

import codecs
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.http import parse_header_parameters


def charset_problem(request: HttpRequest) -> str:
    """Why Django could not decode ``request`` ('' when it can)."""
    media_type, params = parse_header_parameters(request.META.get("CONTENT_TYPE", ""))
    charset = params.get("charset")
    if charset is None:
        return ""
    if not _is_text_encoding(charset):
        return f"unsupported charset {charset[:40]!r} in Content-Type"
    if media_type == "application/x-www-form-urlencoded" and codecs.lookup(charset).name != "utf-8":
        # Django refuses these too, but only once a view reads the form, with a traceback
        # in the log for what is a client's mistake.
        return "a form body (application/x-www-form-urlencoded) must be UTF-8: charset"
    return ""


def query_problem(request: HttpRequest) -> str:
    """Why the query string cannot reach the database ('' when it can)."""
    query = request.META.get("QUERY_STRING", "")
    if "\x00" not in query and "%00" not in query:
        return ""
    # Decoded as Django decodes it; undecodable bytes become U+FFFD there, never a 500.
    pairs = parse_qsl(query, keep_blank_values=True, errors="replace")
    if any("\x00" in name or "\x00" in value for name, value in pairs):
        return "query parameters must not contain NUL characters"
    return ""


def _is_text_encoding(name: str) -> bool:
    try:
        return bool(codecs.lookup(name)._is_text_encoding)
    except (LookupError, ValueError):  # ValueError: a NUL in the name
        return False


def _is_api_view(view_func: Callable[..., HttpResponse]) -> bool:
    from rest_framework.views import APIView

    view_class = getattr(view_func, "cls", None)
    return isinstance(view_class, type) and issubclass(view_class, APIView)


class BadRequestMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        problem = charset_problem(request)
        if problem:
            return JsonResponse({"detail": problem}, status=400)
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., HttpResponse],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        # The API validates its own query parameters and names the field in its 400.
        if _is_api_view(view_func):
            return None
        problem = query_problem(request)
        return JsonResponse({"detail": problem}, status=400) if problem else None
