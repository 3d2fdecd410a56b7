"""The sending side's services, by name: `from deliveries import services`.

This is the public façade; each service lives once, in the module of what it is about:
the pipeline's stages in `deliveries.pipeline` (emit, fan-out, wake, the endpoint's owner,
record, sweep, purge), an endpoint's life in `deliveries.endpoints`, what operators do in
`deliveries.operator`, portal links in `deliveries.portal.links`. The library's own
modules import those modules, never this one.

A delivery not sent now (a rate limit, an open circuit, the breaker's probe out, requests
with no answer) is *deferred*: it stays pending, without spending an attempt, due again
later.
"""

from deliveries.endpoints.lifecycle import (
    EndpointInvalid,
    EndpointNotEnableable,
    endpoint_check,
    endpoint_create,
    endpoint_resume,
    endpoint_rotate_secret,
    endpoint_set_state,
    endpoint_suspend,
    endpoint_tenant_disable,
    endpoint_tenant_enable,
    endpoint_tenant_may_enable,
    endpoint_update,
)
from deliveries.endpoints.options import endpoint_public_key, endpoint_rotate_signing_key
from deliveries.endpoints.removal import endpoint_delete
from deliveries.endpoints.test_event import (
    EndpointNotActive,
    TestEventResult,
    endpoint_send_test_event,
    endpoint_test_now,
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
from deliveries.pipeline.emit import EventRefused, emit
from deliveries.pipeline.fanout import event_fan_out, events_fan_out
from deliveries.pipeline.owner import WorkResult, endpoint_work, endpoint_work_for_delivery
from deliveries.pipeline.owner.outcomes import DeliveryOutcome
from deliveries.pipeline.purge import PurgeResult, purge_expired
from deliveries.pipeline.sweep import SweepResult, sweep
from deliveries.pipeline.wake import wake_endpoints
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
    "EventRefused",
    "PortalLinkForbidden",
    "PortalLinkInvalid",
    "PortalSession",
    "PurgeResult",
    "ReplayFilters",
    "ReplayInvalid",
    "ReplayPreview",
    "Retention",
    "SweepResult",
    "TenantSettingsInvalid",
    "TestEventResult",
    "ValidationFolded",
    "ValidationUnavailable",
    "WorkResult",
    "deliveries_recover",
    "delivery_cancel",
    "delivery_retry",
    "emit",
    "endpoint_check",
    "endpoint_create",
    "endpoint_delete",
    "endpoint_pin_versions",
    "endpoint_public_key",
    "endpoint_request_validation",
    "endpoint_resume",
    "endpoint_rotate_secret",
    "endpoint_rotate_signing_key",
    "endpoint_send_test_event",
    "endpoint_set_state",
    "endpoint_suspend",
    "endpoint_tenant_disable",
    "endpoint_tenant_enable",
    "endpoint_tenant_may_enable",
    "endpoint_test_now",
    "endpoint_update",
    "endpoint_work",
    "endpoint_work_for_delivery",
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
    "wake_endpoints",
]
