"""Version pins: which version of each event type an endpoint receives."""

from typing import Any

from deliveries import catalogue
from deliveries.models import Endpoint


def default_pins(event_types: list[str], pins: dict[str, Any] | None = None) -> dict[str, int]:
    """``pins`` completed with the newest version of every declared type the filters match.

    Types declared after the endpoint subscribed get no pin here; until the endpoint pins
    one (or changes its filters), it receives them in the version they were emitted in.
    """
    completed = {name: int(version) for name, version in (pins or {}).items()}
    for event_type in catalogue.matching(event_types):
        completed.setdefault(event_type.name, event_type.newest.number)
    return completed


def endpoint_pin_versions(*, endpoint: Endpoint) -> Endpoint:
    """Pin the newest version of every matched type the endpoint has no pin for yet."""
    pins = default_pins(endpoint.event_types, endpoint.version_pins)
    if pins != endpoint.version_pins:
        endpoint.version_pins = pins
        endpoint.save(update_fields=["version_pins", "updated_at"])
    return endpoint
