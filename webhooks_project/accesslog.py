"""Log lines without portal link tokens.

A portal link is ``<base>/portal/open/<token>``: whoever reads a log line with the token
could open the portal before its tenant does. Two places would write it:

* gunicorn's access log, which Django's logging never sees: :class:`RedactingLogger`
  (``--logger-class webhooks_project.accesslog.RedactingLogger``, as the Procfile, the
  compose file and the image's ``CMD`` start gunicorn) masks it in every atom of the
  access log format (request line, path, and the raw URI);
* Django's own loggers (``django.request`` "Forbidden: /portal/open/...",
  ``django.security.csrf``, ``django.server`` under ``runserver``): :class:`RedactTokens`,
  a logging filter on this deployment's handlers (settings.LOGGING).
"""

import logging
import re
from typing import Any
from urllib.parse import unquote

from gunicorn.glogging import Logger

#: The token after ``/open/`` (the portal's link; nothing else of ours is mounted there).
TOKEN_IN_PATH = re.compile(r"(/open/)[^/\s?#\"'<>]+")
MASK = r"\1[redacted]"
#: A run of text that may be a (percent-encoded) path: Django routes the decoded path, so
#: ``/portal/%6Fpen/<token>`` opens the portal as ``/portal/open/<token>`` does.
_ENCODED_WORD = re.compile(r"[^\s\"'<>]*%[^\s\"'<>]*")


def redact(text: str) -> str:
    text = TOKEN_IN_PATH.sub(MASK, text)
    return _ENCODED_WORD.sub(_redact_decoded, text) if "%" in text else text


def _redact_decoded(match: re.Match[str]) -> str:
    # Judged on the decoded text, and written decoded (masked) when it holds a token.
    word = match.group(0)
    path, mark, query = word.partition("?")
    decoded = unquote(path)
    if not TOKEN_IN_PATH.search(decoded):
        return word
    return TOKEN_IN_PATH.sub(MASK, decoded) + mark + query


class RedactingLogger(Logger):
    """gunicorn's logger, with portal link tokens masked in the access log."""

    def atoms(self, resp: Any, req: Any, environ: Any, request_time: Any) -> dict[str, Any]:
        atoms: dict[str, Any] = super().atoms(resp, req, environ, request_time)
        for key in ("r", "U", "q", "f"):
            value = atoms.get(key)
            if isinstance(value, str):
                atoms[key] = redact(value)
        # {raw_uri}e and the like come from the WSGI environ, looked up lazily.
        for key in list(atoms):
            if key.startswith("{") and isinstance(atoms[key], str):
                atoms[key] = redact(atoms[key])
        return atoms


class RedactTokens(logging.Filter):
    """Rewrites a record whose text holds a portal link token; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        request = getattr(record, "request", None)
        if request is not None and TOKEN_IN_PATH.search(getattr(request, "path", "") or ""):
            # structlog's ExtraAdder would print the request's repr, path included.
            record.request = redact(repr(request))
        return True
