"""Services of the sending side: the only place where its business rules live."""

from .endpoints import (
    endpoint_create,
    endpoint_resume,
    endpoint_rotate_secret,
    endpoint_set_state,
    endpoint_suspend,
)
from .events import EventValidationError, emit
from .fanout import event_fan_out
from .sending import (
    DeliveryNotRetryable,
    Outcome,
    delivery_attempt,
    delivery_claim,
    delivery_retry,
)
from .sweeper import SweepResult, sweep
from .versions import endpoint_pin_versions

__all__ = [
    "DeliveryNotRetryable",
    "EventValidationError",
    "Outcome",
    "SweepResult",
    "delivery_attempt",
    "delivery_claim",
    "delivery_retry",
    "emit",
    "endpoint_create",
    "endpoint_pin_versions",
    "endpoint_resume",
    "endpoint_rotate_secret",
    "endpoint_set_state",
    "endpoint_suspend",
    "event_fan_out",
    "sweep",
]
