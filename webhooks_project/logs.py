"""Structured logs: one JSON object per line in production, aligned key=value in DEBUG.

Everything logs through the standard ``logging`` module with ``extra={...}`` fields;
structlog's ``ProcessorFormatter`` renders the record and its extra fields. A last line of
defence drops fields whose name says they hold a secret or a payload, so a careless
``extra`` cannot leak one (the call sites never pass them in the first place).
"""

import logging
from collections.abc import MutableMapping
from typing import Any

import structlog

#: Field names never written, whatever their value.
FORBIDDEN_FIELD_WORDS = ("secret", "signature", "authorization", "password", "token", "cookie")
FORBIDDEN_FIELDS = frozenset({"payload", "body", "raw_body", "headers", "request_headers"})
REDACTED = "[redacted]"


def drop_sensitive_fields(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for key in list(event_dict):
        lowered = key.lower()
        if lowered in FORBIDDEN_FIELDS or any(word in lowered for word in FORBIDDEN_FIELD_WORDS):
            event_dict[key] = REDACTED
    return event_dict


def build_formatter(renderer: str = "json") -> logging.Formatter:
    """The formatter named in ``settings.LOGGING`` (``renderer``: "json" or "console")."""
    pre_chain: list[Any] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.stdlib.ExtraAdder(),
        drop_sensitive_fields,
    ]
    final: Any
    if renderer == "console":
        final = structlog.dev.ConsoleRenderer(colors=False)
    else:
        pre_chain.append(structlog.processors.format_exc_info)
        # "event" would be confused with our events: the text is the "message".
        pre_chain.append(structlog.processors.EventRenamer("message"))
        final = structlog.processors.JSONRenderer()
    return structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, final],
        foreign_pre_chain=pre_chain,
    )
