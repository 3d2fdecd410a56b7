"""The handler registry: which function processes which event type.

Register a handler with the decorator; modules listed in ``RECEIVERS_HANDLER_MODULES`` are
imported when Django starts, so their decorators run::

    from receivers.handlers import inbox_handler

    @inbox_handler("invoice.paid", sources=["billing"])
    def invoice_paid(event: InboxEvent) -> None:
        ...

A handler runs inside a database transaction that also marks the inbox row processed, so
its database changes and the row's status commit together. It must still be idempotent
(events are delivered at least once, and a worker may die after an external side effect).
Raise ``PermanentFailure`` for an event that can never succeed (it is failed at once), or
``receivers.idempotency.MissingPredecessor`` to be retried later; any other exception is
retried with backoff. Types without a handler are stored, acknowledged and marked ignored.

Types are exact (``payment.succeeded``) or a prefix pattern (``payment.*``); the most
specific match wins, and a handler registered for named sources wins over a general one.
"""

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from receivers.models import InboxEvent

Handler = Callable[["InboxEvent"], None]
H = TypeVar("H", bound=Handler)


class PermanentFailure(Exception):
    """The event can never be processed as it is: fail it now, do not retry."""


class HandlerRegistry:
    def __init__(self) -> None:
        self._handlers: dict[tuple[str | None, str], Handler] = {}

    def register(
        self, event_type: str, handler: Handler, *, sources: Iterable[str] | None = None
    ) -> None:
        if not event_type or (event_type.endswith("*") and not event_type.endswith(".*")):
            raise ValueError(f"invalid event type pattern {event_type!r}")
        for source in list(sources) if sources is not None else [None]:
            key = (source, event_type)
            existing = self._handlers.get(key)
            if existing is not None and existing is not handler:
                raise ValueError(f"a handler for {event_type!r} ({source or 'any source'}) exists")
            self._handlers[key] = handler

    def unregister(self, event_type: str, *, sources: Iterable[str] | None = None) -> None:
        for source in list(sources) if sources is not None else [None]:
            self._handlers.pop((source, event_type), None)

    def resolve(self, source: str, event_type: str) -> Handler | None:
        for pattern in _patterns(event_type):
            for key in ((source, pattern), (None, pattern)):
                if key in self._handlers:
                    return self._handlers[key]
        return None

    def types(self) -> list[str]:
        return sorted({event_type for _, event_type in self._handlers})


def _patterns(event_type: str) -> list[str]:
    """``a.b.c`` -> ``a.b.c``, ``a.b.*``, ``a.*``: most specific first."""
    parts = event_type.split(".")
    return [event_type] + [".".join(parts[:i]) + ".*" for i in range(len(parts) - 1, 0, -1)]


registry = HandlerRegistry()


def inbox_handler(*event_types: str, sources: Iterable[str] | None = None) -> Callable[[H], H]:
    """Register the decorated function for ``event_types`` (optionally only some sources)."""
    source_list = list(sources) if sources is not None else None

    def decorate(handler: H) -> H:
        for event_type in event_types:
            registry.register(event_type, handler, sources=source_list)
        return handler

    return decorate
