"""Services of the sending side: the only place where its business rules live.

The pipeline, stage by stage:

- **emit** (`events`): the product's event, written in its own transaction;
- **fan-out** (`fanout`): one delivery per subscribed endpoint, in that same transaction
  for few endpoints, else by the fan-out task after commit;
- **dispatch** (`dispatch`): the task messages, a few deliveries of one endpoint each;
- **attempt** (`attempt`, with the gate in `admission`, `breaker` and `suspension`): claim
  the rows, take in-flight slots, sign and send;
- **record** (`recording`): the attempts, the new states and the endpoint's health, in
  one transaction.

A delivery not sent now (no slot, a rate limit, an open circuit, a probe out) is
*deferred*: released without spending an attempt, due again later.
"""

from .attempt import (
    DeliveryNotRetryable,
    Outcome,
    deliveries_attempt,
    deliveries_busy_wait,
    deliveries_claim,
    deliveries_defer_if_busy,
    delivery_attempt,
    delivery_retry,
)
from .deadletters import delivery_cancel
from .endpoint_check import EndpointNotActive, endpoint_send_test_event
from .endpoint_options import endpoint_public_key, endpoint_rotate_signing_key
from .endpoints import (
    EndpointInvalid,
    endpoint_create,
    endpoint_delete,
    endpoint_resume,
    endpoint_rotate_secret,
    endpoint_set_state,
    endpoint_suspend,
    endpoint_update,
    endpoint_validate,
)
from .erasure import (
    ErasureInvalid,
    tenant_erasure_run,
    tenant_erasure_start,
    tenant_erasures_resume,
)
from .events import EventValidationError, emit
from .fanout import event_fan_out, events_fan_out
from .portal import (
    PortalLinkForbidden,
    PortalLinkInvalid,
    portal_link_create,
    portal_link_open,
    portal_links_purge,
    portal_secret_revealed,
    portal_session_end,
    portal_session_tenant,
)
from .recovery import deliveries_recover, failed_deliveries
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
from .sweeper import SweepResult, sweep
from .tenant_settings import (
    Retention,
    TenantSettingsInvalid,
    tenant_retention,
    tenant_settings_set,
)
from .versions import endpoint_pin_versions

__all__ = [
    "DeliveryNotRetryable",
    "EndpointInvalid",
    "EndpointNotActive",
    "ErasureInvalid",
    "EventValidationError",
    "Outcome",
    "PortalLinkForbidden",
    "PortalLinkInvalid",
    "PurgeResult",
    "ReplayFilters",
    "ReplayInvalid",
    "ReplayPreview",
    "Retention",
    "SweepResult",
    "TenantSettingsInvalid",
    "deliveries_attempt",
    "deliveries_busy_wait",
    "deliveries_claim",
    "deliveries_defer_if_busy",
    "deliveries_recover",
    "delivery_attempt",
    "delivery_cancel",
    "delivery_retry",
    "emit",
    "endpoint_create",
    "endpoint_delete",
    "endpoint_pin_versions",
    "endpoint_public_key",
    "endpoint_resume",
    "endpoint_rotate_secret",
    "endpoint_rotate_signing_key",
    "endpoint_send_test_event",
    "endpoint_set_state",
    "endpoint_suspend",
    "endpoint_update",
    "endpoint_validate",
    "event_fan_out",
    "events_fan_out",
    "failed_deliveries",
    "portal_link_create",
    "portal_link_open",
    "portal_links_purge",
    "portal_secret_revealed",
    "portal_session_end",
    "portal_session_tenant",
    "purge_expired",
    "replay_create",
    "replay_preview",
    "replay_run_inline",
    "replay_step",
    "replays_resume_stalled",
    "sweep",
    "tenant_erasure_run",
    "tenant_erasure_start",
    "tenant_erasures_resume",
    "tenant_retention",
    "tenant_settings_set",
]
