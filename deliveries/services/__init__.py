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
from .retention import PurgeResult, purge_expired
from .sending import (
    DeliveryNotRetryable,
    Outcome,
    delivery_attempt,
    delivery_claim,
    delivery_retry,
)
from .sweeper import SweepResult, sweep

__all__ = [
    "DeliveryNotRetryable",
    "EventValidationError",
    "Outcome",
    "PurgeResult",
    "SweepResult",
    "delivery_attempt",
    "delivery_claim",
    "delivery_retry",
    "emit",
    "endpoint_create",
    "endpoint_resume",
    "endpoint_rotate_secret",
    "endpoint_set_state",
    "endpoint_suspend",
    "event_fan_out",
    "purge_expired",
    "sweep",
]
