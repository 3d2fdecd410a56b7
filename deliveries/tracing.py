"""W3C trace context (``traceparent``) captured when an event is emitted.

The header joins the product request that emitted an event, the event row and every
attempt to deliver it. Where it comes from, first match wins: the value the caller passes,
the current OpenTelemetry span (when the optional ``opentelemetry-api`` is installed and a
span is active), nothing. No Django here.
"""

import re

# version 00: "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>" (lowercase only).
TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
INVALID_TRACE_ID = "0" * 32
INVALID_PARENT_ID = "0" * 16


def is_valid(value: str) -> bool:
    """True for a well-formed version-00 traceparent with non-zero ids."""
    match = TRACEPARENT.fullmatch(value)
    return bool(
        match and match.group(1) != INVALID_TRACE_ID and match.group(2) != INVALID_PARENT_ID
    )


def from_header(value: str | None) -> str | None:
    """An incoming header's traceparent, or None; the W3C spec says to ignore a bad one."""
    if not value:
        return None
    value = value.strip()
    return value if is_valid(value) else None


def from_opentelemetry() -> str | None:
    """The active OpenTelemetry span's traceparent, or None (no span, or no OpenTelemetry)."""
    try:
        from opentelemetry import propagate
    except ImportError:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return from_header(carrier.get("traceparent"))
