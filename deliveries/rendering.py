"""Which version of an event's data an endpoint receives.

Events are immutable and stored in the version that was newest when they were emitted.
An endpoint that pinned an older version of the type gets it built from the stored data
with the catalogue's ``from_newer`` functions, at every attempt, so a retry or a replay
next year carries the same meaning as the first attempt. Nothing is ever upgraded: an
event stored before a newer version existed is sent as stored, and a type that is not
(or no longer) declared in this process is sent as stored too.
"""

from typing import Any

from . import catalogue, payloads
from .models import Endpoint, Event


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
