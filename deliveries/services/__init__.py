"""Services of the sending side: the only place where its business rules live."""

from .deadletters import delivery_cancel
from .endpoint_check import EndpointNotActive, endpoint_send_test_event
from .endpoints import (
    EndpointInvalid,
    endpoint_create,
    endpoint_resume,
    endpoint_rotate_secret,
    endpoint_set_state,
    endpoint_suspend,
    endpoint_update,
    endpoint_validate,
)
from .events import EventValidationError, emit
from .fanout import event_fan_out, events_fan_out
from .replay import (
    ReplayFilters,
    ReplayInvalid,
    ReplayPreview,
    replay_create,
    replay_preview,
    replay_run_inline,
    replay_step,
    replays_resume_stalled,
)
from .retention import PurgeResult, purge_expired
from .sending import (
    DeliveryNotRetryable,
    Outcome,
    deliveries_attempt,
    deliveries_busy_wait,
    deliveries_claim,
    delivery_attempt,
    delivery_retry,
)
from .sweeper import SweepResult, sweep
from .versions import endpoint_pin_versions

__all__ = [
    "DeliveryNotRetryable",
    "EndpointInvalid",
    "EndpointNotActive",
    "EventValidationError",
    "Outcome",
    "PurgeResult",
    "ReplayFilters",
    "ReplayInvalid",
    "ReplayPreview",
    "SweepResult",
    "deliveries_attempt",
    "deliveries_busy_wait",
    "deliveries_claim",
    "delivery_attempt",
    "delivery_cancel",
    "delivery_retry",
    "emit",
    "endpoint_create",
    "endpoint_pin_versions",
    "endpoint_resume",
    "endpoint_rotate_secret",
    "endpoint_send_test_event",
    "endpoint_set_state",
    "endpoint_suspend",
    "endpoint_update",
    "endpoint_validate",
    "event_fan_out",
    "events_fan_out",
    "purge_expired",
    "replay_create",
    "replay_preview",
    "replay_run_inline",
    "replay_step",
    "replays_resume_stalled",
    "sweep",
]
