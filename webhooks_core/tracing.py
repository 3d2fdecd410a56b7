"""W3C trace context (``traceparent``) captured when an event is emitted.

The header joins the product request that emitted an event, the event row and every
attempt to deliver it. Where it comes from, first match wins: the value the caller passes,
the current OpenTelemetry span (when the optional ``opentelemetry-api`` is installed and a
span is active), nothing. No Django here.

Spans of our own work (emit, fan-out, attempts, receiving, processing) are made below.
"""

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

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


# --- spans ---------------------------------------------------------------------------
#
# Spans are made only when the optional `opentelemetry-api` is installed AND a tracer
# provider is configured (`opentelemetry.trace.set_tracer_provider`, or `use_provider`
# below); otherwise `span` yields None at the cost of a function call, and nothing
# else changes. Attribute names follow the OpenTelemetry semantic conventions where one
# exists (`http.*`, `server.*`, `url.*`, `error.type`), and `webhooks.*` otherwise.

TRACER_NAME = "django-reliable-webhooks"
_NOT_LOADED: Any = object()
_api: Any = _NOT_LOADED
_provider: Any = None


def _load_api() -> Any:
    global _api
    if _api is _NOT_LOADED:
        try:
            from opentelemetry import trace
            from opentelemetry.trace.propagation.tracecontext import (
                TraceContextTextMapPropagator,
            )
        except ImportError:
            _api = None
        else:
            _api = (trace, TraceContextTextMapPropagator())
    return _api


def use_provider(provider: Any) -> None:
    """Trace with this provider instead of the global one (None: back to the global)."""
    global _provider
    _provider = provider


def _tracer() -> Any:
    api = _load_api()
    if api is None:
        return None
    trace = api[0]
    provider = _provider or trace.get_tracer_provider()
    # The API's own providers make non-recording spans: not worth their cost.
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider.get_tracer(TRACER_NAME)


def enabled() -> bool:
    """Whether spans are made (see above): a caller may skip gathering a span's
    attributes when they are not."""
    return _tracer() is not None


@contextmanager
def span(
    name: str,
    *,
    kind: str = "INTERNAL",
    traceparent: str | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Any]:
    """A span, current inside the block, child of ``traceparent`` when given (else of the
    current span); None when tracing is off. An exception marks it as an error."""
    tracer = _tracer()
    if tracer is None:
        yield None
        return
    trace, propagator = _api
    context = propagator.extract({"traceparent": traceparent}) if traceparent else None
    with tracer.start_as_current_span(
        name,
        context=context,
        kind=getattr(trace.SpanKind, kind),
        attributes={k: v for k, v in (attributes or {}).items() if v is not None},
    ) as current:
        yield current


def traceparent_of(current: Any) -> str | None:
    """The traceparent naming ``current`` (a span from `span`) as the parent, or None."""
    if current is None:
        return None
    trace, propagator = _api
    carrier: dict[str, str] = {}
    propagator.inject(carrier, context=trace.set_span_in_context(current))
    return from_header(carrier.get("traceparent"))


def set_attributes(current: Any, attributes: Mapping[str, Any]) -> None:
    """Set these attributes on ``current`` (a span or None); None values are skipped."""
    if current is None:
        return
    for key, value in attributes.items():
        if value is not None:
            current.set_attribute(key, value)


def annotate_current(attributes: Mapping[str, Any]) -> None:
    """Set attributes on the current span when tracing is on (the block's `span`)."""
    if _tracer() is None:
        return
    set_attributes(_api[0].get_current_span(), attributes)


def mark_error(current: Any, error_type: str, description: str = "") -> None:
    """Flag a span as failed (`error.type` as the semantic conventions name it)."""
    if current is None:
        return
    trace = _api[0]
    current.set_attribute("error.type", error_type)
    current.set_status(trace.Status(trace.StatusCode.ERROR, description or None))


def attempt_attributes(
    *, url: str, attempt: int, delivery_id: int, endpoint_id: str, event_id: str, event_type: str
) -> dict[str, Any]:
    """An attempt's HTTP client span attributes, known before the request. The URL is
    reduced to scheme, host and port: its path or query may hold a consumer's token."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    return {
        "http.request.method": "POST",
        "url.scheme": parts.scheme,
        "server.address": parts.hostname,
        "server.port": port,
        # The semantic conventions count resends of the same request, not the first try.
        "http.request.resend_count": attempt - 1 if attempt > 1 else None,
        "webhooks.attempt": attempt,
        "webhooks.delivery.id": delivery_id,
        "webhooks.endpoint.id": endpoint_id,
        "webhooks.event.id": event_id,
        "webhooks.event.type": event_type,
    }


def attempt_outcome(current: Any, *, status_code: int | None, outcome: str, error: str) -> None:
    """What an attempt came to: the status code, our verdict, and an error type."""
    if current is None:
        return
    set_attributes(
        current, {"http.response.status_code": status_code, "webhooks.outcome": str(outcome)}
    )
    if status_code is not None and status_code >= 400:
        mark_error(current, str(status_code))
    elif status_code is None and error:
        # Transport errors read "<exception class>: <detail>"; the class is the type.
        mark_error(current, error.split(":", 1)[0].strip() or "_OTHER", error[:200])
