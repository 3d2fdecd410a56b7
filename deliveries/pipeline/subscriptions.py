"""Whether an endpoint receives an event: its tenant, its event types, then its payload filter.

Fan-out and replays both ask here, so a replay applies each endpoint's filter as it is
now. The filter sees the event as stored (its emitted version of the data) in the default
envelope's shape; the document is built once per event, and only when an endpoint whose
types match has a filter, so endpoints without filters pay nothing for the feature.

When an offloaded payload cannot be read back, the filter cannot be evaluated: the event is
then let through (logged), so that nothing is lost; its delivery shows the storage error
and retries like any other, instead of the whole fan-out failing over and over.
"""

import logging
from typing import Any

from deliveries.models import Endpoint, Event
from deliveries.pipeline import event_types, payload_filters, payloads
from deliveries.pipeline.rendering import utc_text

logger = logging.getLogger(__name__)
_UNREADABLE: dict[str, Any] = {}

#: The Endpoint fields `Subscribers.accepts` reads (for querysets narrowed with `only`).
FIELDS = ("tenant", "event_types", "filter")


def filter_document(event: Event) -> dict[str, Any]:
    """The JSON a payload filter is evaluated against."""
    return {
        "id": str(event.pk),
        "type": event.type,
        "version": event.version,
        "occurred_at": utc_text(event.occurred_at),
        "data": payloads.load(event),
    }


class Subscribers:
    """Matches one event against many endpoints."""

    def __init__(self, event: Event) -> None:
        self.event = event
        self._document: dict[str, Any] | None = None

    def accepts(self, endpoint: Endpoint) -> bool:
        # Tenants never see each other's events; no tenant matches no tenant only.
        if endpoint.tenant != self.event.tenant:
            return False
        if not event_types.matches(self.event.type, endpoint.event_types):
            return False
        if not endpoint.filter:
            return True
        if self._document is None:
            try:
                self._document = filter_document(self.event)
            except payloads.PayloadUnavailable:
                logger.warning(
                    "payload unreadable at fan-out: filters not applied",
                    extra={"event_id": str(self.event.pk), "event_type": self.event.type},
                )
                self._document = _UNREADABLE
        if self._document is _UNREADABLE:
            return True
        return payload_filters.cached_predicate(endpoint.filter)(self._document)
