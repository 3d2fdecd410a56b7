"""Matching event types against an endpoint's filters. Pure functions."""

from collections.abc import Iterable

WILDCARD = "*"
#: The harmless event an operator or a tenant sends to check one endpoint end to end.
TEST_EVENT_TYPE = "webhook.test"


def validate_filter(pattern: str) -> str | None:
    """An error message for a malformed filter, or None when it is fine."""
    if not isinstance(pattern, str) or not pattern.strip():
        return "an event-type filter must be a non-empty string"
    if pattern != pattern.strip():
        return f"{pattern!r} has surrounding white space"
    if any(char.isspace() for char in pattern):
        # Event types never hold white space, so such a filter could never match.
        return f"{pattern!r} contains white space"
    if pattern == WILDCARD:
        return None
    body = pattern.removesuffix(".*")
    if "*" in body:
        return f"{pattern!r}: '*' is allowed only alone or as a final '.*'"
    if not body or any(not part for part in body.split(".")):
        return f"{pattern!r} is not a dotted event-type name"
    return None


def matches(event_type: str, patterns: Iterable[str]) -> bool:
    for pattern in patterns:
        if pattern in (WILDCARD, event_type):
            return True
        if pattern.endswith(".*") and event_type.startswith(pattern[:-1]):
            return True
    return False
