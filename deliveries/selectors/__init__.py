"""Selectors of the sending side: the reads behind its pages, each query written once.

Services write; selectors read. The admin, the portal, the API and the dashboard call
these rather than build querysets of their own, so a list that two of them show (an
endpoint's deliveries, the failed ones a tenant may send again) is one query. A selector
that serves one tenant takes the tenant and scopes by it; the API narrows by its token's
tenant first (``webhooks_core.api.scoping``) and hands the scoped rows in.

- ``endpoints``: a tenant's endpoints, health figures, signing secrets;
- ``deliveries``: deliveries and events, filtered as the lists ask;
- ``dashboard``: the operations dashboard's time series.

The engine's own reads (claims, the owner's rounds, the sweeper) stay in `deliveries.pipeline`.
Modules of this package import each other by module, never through this ``__init__``.
"""

from deliveries.selectors.deliveries import (
    TENANT_FIELD,
    deliveries_filtered,
    delivery_details,
    endpoint_recent_deliveries,
    event_timeline,
    event_types_seen,
    events_with_deliveries,
    failed_deliveries,
    recent_test_deliveries,
    tenant_deliveries,
)
from deliveries.selectors.endpoints import (
    endpoint_recent_polls,
    endpoint_signing_secrets,
    endpoints_with_stats,
    held_deliveries_count,
    known_tenants,
    replayable_endpoints,
    success_rate,
    tenant_endpoints,
)

__all__ = [
    "TENANT_FIELD",
    "deliveries_filtered",
    "delivery_details",
    "endpoint_recent_deliveries",
    "endpoint_recent_polls",
    "endpoint_signing_secrets",
    "endpoints_with_stats",
    "event_timeline",
    "event_types_seen",
    "events_with_deliveries",
    "failed_deliveries",
    "held_deliveries_count",
    "known_tenants",
    "recent_test_deliveries",
    "replayable_endpoints",
    "success_rate",
    "tenant_deliveries",
    "tenant_endpoints",
]
