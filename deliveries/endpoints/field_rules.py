"""An endpoint's field rules, written once: bounds, lengths, defaults, and which fields
a caller may set (always, on creation only) or only read.

The model takes its defaults and lengths from here; the API serializer
(`deliveries.api.serializers`), the admin's form (`deliveries.admin.endpoints`) and the
portal's form (`deliveries.portal.forms`) build their fields from here; the services
(`deliveries.endpoints.lifecycle`) check the same rules and own the decision. Change a
rule here and every one of them follows (`tests/deliveries/endpoints/test_field_rules.py`).

A pure module: no ORM, no forms, no serializers.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Bound:
    """A numeric setting: its type, smallest and largest value, and its default.

    ``nullable``: None is allowed and takes the global WEBHOOKS_* default (``default`` is
    then None too)."""

    name: str
    kind: type[int] | type[float]
    low: float
    high: float
    default: float | None = None
    nullable: bool = False

    @property
    def refusal(self) -> str:
        """What the services (and the admin's form) say of a value out of bounds."""
        return f"Must be a number from {self.low:g} to {self.high:g}."


#: The numeric settings, in the order the admin shows them.
NUMERIC: tuple[Bound, ...] = (
    # Retries.
    Bound("max_attempts", int, 1, 50, default=12),
    Bound("backoff_base_seconds", float, 0.01, 3600, default=10.0),
    Bound("backoff_max_seconds", float, 0.01, 86400, default=900.0),
    Bound("retry_window_seconds", float, 1, 7 * 86400, default=24 * 3600.0),
    # Timeouts of one request.
    Bound("connect_timeout_seconds", float, 0.1, 30, default=3.0),
    Bound("read_timeout_seconds", float, 0.1, 60, default=10.0),
    # Health and isolation; None takes the global WEBHOOKS_* default.
    Bound("suspend_after_failures", int, 0, 100000, nullable=True),
    Bound("suspend_window_seconds", float, 0, 30 * 86400, nullable=True),
    Bound("max_in_flight", int, 1, 1000, nullable=True),
    Bound("rate_limit_per_second", int, 0, 100000, nullable=True),
)
BY_NAME: dict[str, Bound] = {bound.name: bound for bound in NUMERIC}
#: The defaults of the settings that are never None (the model's).
DEFAULTS: dict[str, float] = {b.name: b.default for b in NUMERIC if b.default is not None}

# Lengths.
URL_MAX_LENGTH = 2048
DESCRIPTION_MAX_LENGTH = 500
#: event_types: how many filters, and how long each.
MAX_FILTERS = 100
FILTER_MAX_LENGTH = 200
#: version_pins: {event type: 1..MAX_VERSION_PIN}.
MAX_VERSION_PIN = 10_000
#: secret_headers: how long a header name is.
HEADER_NAME_MAX_LENGTH = 100

#: A secret rotation's grace: how long the current secrets keep signing next to the new.
MAX_ROTATION_GRACE_SECONDS = 30 * 86400

# Who may set what.
#: The payload filter, the signature scheme and the envelope (`endpoints.options`).
OPTION_FIELDS = ("filter", "signature_scheme", "envelope")
#: Mutual TLS (`endpoints.auth`); the key is write-only.
TLS_FIELDS = ("client_certificate", "client_key", "ca_certificates")
#: Delivery auth (`endpoints.auth`): OAuth2, then mutual TLS.
AUTH_FIELDS = ("auth", *TLS_FIELDS)
#: The fields an endpoint is configured with, in the order the admin's form shows them
#: (delivery auth aside: the forms take it in parts, `deliveries.endpoints.auth_forms`).
CONFIG_FIELDS = (
    "url",
    "tenant",
    "description",
    "owner_email",
    "event_types",
    "custom_headers",
    "secret_headers",
    "version_pins",
    "ordered_delivery",
    *OPTION_FIELDS,
    "validation",
    *(rule.name for rule in NUMERIC),
)
#: Set when an endpoint is created, never changed: its deliveries (that tenant's events)
#: would move to another tenant with it; a push endpoint's rows are claimed by an owner,
#: a polling endpoint's read by its consumer (`mode`).
CREATE_ONLY = frozenset({"tenant", "mode"})
MODE_FIXED = "The mode of an endpoint cannot be changed; create another endpoint."
POLL_HAS_NO_URL = "A polling endpoint has no URL: its consumer reads its events."
#: Fields `endpoint_update` may change; ``state`` goes through `endpoint_set_state`.
EDITABLE = frozenset({*CONFIG_FIELDS, *AUTH_FIELDS}) - CREATE_ONLY
TENANT_FIXED = "The tenant of an endpoint cannot be changed."
#: Stored fields only the system sets (the services, the workers); shown, never taken.
READ_ONLY = (
    "id",
    "validation_state",
    "validation_reason",
    "validation_checked_at",
    "validation_allowed_rate",
    "state_reason",
    "state_changed_at",
    "consecutive_failures",
    "last_success_at",
    "last_failure_at",
    "circuit_state",
    "circuit_changed_at",
    "created_at",
    "updated_at",
)
