"""Services of the sending side: the only place where its business rules live.

The pipeline, stage by stage:

- **emit** (`events`): the product's event, written in its own transaction;
- **fan-out** (`fanout`): one delivery per subscribed endpoint, right after the emitting
  transaction commits for few endpoints, else by the fan-out task;
- **dispatch** (`dispatch`): the task messages; a delivery's says only "endpoint E has
  work", at most one out per endpoint;
- **attempt** (`owner`, with `ownership`, `claims`, the gate in `admission`, `breaker` and
  `suspension`, the process's cap in `lanes`, and a destination kind per URL scheme in
  `deliveries.destinations`): the endpoint's one owner claims what it can send now, signs
  and sends it, each request within its deadline;
- **record** (`recording`): the attempts, the new states and the endpoint's health, in
  one transaction per round.

A delivery not sent now (a rate limit, an open circuit, a probe out, requests with no
answer) is *deferred*: it stays pending, without spending an attempt, due again later.
"""

from deliveries.endpoints.lifecycle import (
    EndpointInvalid,
    EndpointNotEnableable,
    endpoint_create,
    endpoint_owner_disable,
    endpoint_owner_enable,
    endpoint_owner_may_enable,
    endpoint_resume,
    endpoint_rotate_secret,
    endpoint_set_state,
    endpoint_suspend,
    endpoint_update,
    endpoint_validate,
)
from deliveries.endpoints.options import endpoint_public_key, endpoint_rotate_signing_key
from deliveries.endpoints.removal import endpoint_delete
from deliveries.endpoints.test_event import (
    EndpointNotActive,
    ProbeResult,
    endpoint_probe,
    endpoint_send_test_event,
)
from deliveries.endpoints.validation import (
    ValidationFolded,
    ValidationUnavailable,
    endpoint_request_validation,
)
from deliveries.endpoints.versions import endpoint_pin_versions
from deliveries.operator.bulk_retry import deliveries_recover
from deliveries.operator.dead_letters import delivery_cancel
from deliveries.operator.erasure import (
    ErasureInvalid,
    tenant_erasure_run,
    tenant_erasure_start,
    tenant_erasures_resume,
)
from deliveries.operator.replay import (
    ReplayFilters,
    ReplayInvalid,
    ReplayPreview,
    replay_create,
    replay_preview,
    replay_run_inline,
    replay_step,
    replays_resume_stalled,
)
from deliveries.operator.retry import DeliveryNotRetryable, delivery_retry
from deliveries.operator.tenant_settings import (
    Retention,
    TenantSettingsInvalid,
    tenant_retention,
    tenant_settings_set,
)
from deliveries.pipeline.emit import EventValidationError, emit
from deliveries.pipeline.fanout import event_fan_out, events_fan_out
from deliveries.pipeline.owner import WorkResult, delivery_attempt, endpoint_work
from deliveries.pipeline.owner.outcomes import DeliveryOutcome
from deliveries.pipeline.purge import PurgeResult, purge_expired
from deliveries.pipeline.sweep import SweepResult, sweep
from deliveries.pipeline.wake import dispatch_wakes
from deliveries.portal.links import (
    PortalLinkForbidden,
    PortalLinkInvalid,
    PortalSession,
    portal_link_create,
    portal_link_open,
    portal_link_peek,
    portal_links_purge,
    portal_secret_revealed,
    portal_session_end,
    portal_session_find,
    portal_session_tenant,
)

__all__ = [
    "DeliveryNotRetryable",
    "DeliveryOutcome",
    "EndpointInvalid",
    "EndpointNotActive",
    "EndpointNotEnableable",
    "ErasureInvalid",
    "EventValidationError",
    "PortalLinkForbidden",
    "PortalLinkInvalid",
    "PortalSession",
    "ProbeResult",
    "PurgeResult",
    "ReplayFilters",
    "ReplayInvalid",
    "ReplayPreview",
    "Retention",
    "SweepResult",
    "TenantSettingsInvalid",
    "ValidationFolded",
    "ValidationUnavailable",
    "WorkResult",
    "deliveries_recover",
    "delivery_attempt",
    "delivery_cancel",
    "delivery_retry",
    "dispatch_wakes",
    "emit",
    "endpoint_create",
    "endpoint_delete",
    "endpoint_owner_disable",
    "endpoint_owner_enable",
    "endpoint_owner_may_enable",
    "endpoint_pin_versions",
    "endpoint_probe",
    "endpoint_public_key",
    "endpoint_request_validation",
    "endpoint_resume",
    "endpoint_rotate_secret",
    "endpoint_rotate_signing_key",
    "endpoint_send_test_event",
    "endpoint_set_state",
    "endpoint_suspend",
    "endpoint_update",
    "endpoint_validate",
    "endpoint_work",
    "event_fan_out",
    "events_fan_out",
    "portal_link_create",
    "portal_link_open",
    "portal_link_peek",
    "portal_links_purge",
    "portal_secret_revealed",
    "portal_session_end",
    "portal_session_find",
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
