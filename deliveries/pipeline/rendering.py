"""What an endpoint receives: which version of an event's data, in which envelope.

Events are immutable and stored in the version that was newest when they were emitted.
An endpoint that pinned an older version of the type gets it built from the stored data
with the catalogue's ``from_newer`` functions, at every attempt, so a retry or a replay
next year carries the same meaning as the first attempt. Nothing is ever upgraded: an
event stored before a newer version existed is sent as stored, and a type that is not
(or no longer) declared in this process is sent as stored too.

Envelopes (an endpoint's ``envelope``):

* ``"default"``: ``{"id", "type", "version", "occurred_at", "data"}`` as
  ``application/json``;
* ``"cloudevents"``: CloudEvents 1.0 in structured JSON mode, as
  ``application/cloudevents+json``: ``specversion`` "1.0", ``id`` (the event id, the same
  as ``webhook-id``), ``source`` (the ``WEBHOOKS_CLOUDEVENTS_SOURCE`` setting), ``type``,
  ``time`` (``occurred_at``), ``datacontenttype`` "application/json", ``data``, and the
  data's version in the extension attribute ``dataversion`` (extension names are lower
  case letters and digits only, so ``version`` alone would read as a core attribute).
"""

from datetime import UTC, datetime
from typing import Any

from deliveries import catalogue
from deliveries.models import Endpoint, Event
from deliveries.pipeline import payloads

DEFAULT = "default"
CLOUDEVENTS = "cloudevents"
ENVELOPES = (DEFAULT, CLOUDEVENTS)
CONTENT_TYPES = {DEFAULT: "application/json", CLOUDEVENTS: "application/cloudevents+json"}
CLOUDEVENTS_SPEC_VERSION = "1.0"
CLOUDEVENTS_VERSION_ATTRIBUTE = "dataversion"


def utc_text(moment: datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, as both envelopes carry times."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def envelope(
    kind: str,
    *,
    event_id: str,
    event_type: str,
    version: int,
    occurred_at: datetime,
    data: Any,
    source: str = "",
) -> dict[str, Any]:
    """The JSON document of one event in the ``kind`` envelope. Pure."""
    if kind == CLOUDEVENTS:
        return {
            "specversion": CLOUDEVENTS_SPEC_VERSION,
            "id": event_id,
            "source": source,
            "type": event_type,
            "time": utc_text(occurred_at),
            "datacontenttype": "application/json",
            CLOUDEVENTS_VERSION_ATTRIBUTE: version,
            "data": data,
        }
    if kind != DEFAULT:
        raise ValueError(f"unknown envelope {kind!r}")
    return {
        "id": event_id,
        "type": event_type,
        "version": version,
        "occurred_at": utc_text(occurred_at),
        "data": data,
    }


def content_type(kind: str) -> str:
    return CONTENT_TYPES[kind]


def versioned_payload(event: Event, endpoint: Endpoint | None) -> tuple[int, Any]:
    """(version, data) of ``event`` as ``endpoint`` wants it.

    Raises ``payloads.PayloadUnavailable`` when offloaded data cannot be read back intact.
    """
    data = payloads.load(event)
    event_type = catalogue.get(event.type)
    if event_type is None or endpoint is None:
        return event.version, data
    pinned = (endpoint.version_pins or {}).get(event.type)
    wanted = pinned if isinstance(pinned, int) and not isinstance(pinned, bool) else None
    return event_type.render(data, stored=event.version, wanted=wanted)
