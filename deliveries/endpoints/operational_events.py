"""Operational events: the platform telling subscribers about endpoints, as Svix does.

They are ordinary events (emitted with `emit`, signed, retried) with one difference in
fan-out: an operational event is never delivered to the endpoint it is about, nor to an
endpoint that is not active (a held copy would be stale news by the time it resumes).
"""

from typing import Any
from uuid import UUID

ENDPOINT_SUSPENDED = "endpoint.suspended"
OPERATIONAL_EVENT_TYPES = frozenset({ENDPOINT_SUSPENDED})


def withheld(*, event_type: str, data: Any, endpoint_id: UUID | str, endpoint_active: bool) -> bool:
    """True when this operational event must not reach this endpoint."""
    if event_type not in OPERATIONAL_EVENT_TYPES:
        return False
    about = data.get("endpoint_id") if isinstance(data, dict) else None
    return not endpoint_active or str(about) == str(endpoint_id)
