"""Event types the platform itself sends, declared like any product's.

`endpoint.suspended` is the operational event subscribers receive when an endpoint is
suspended automatically; `webhook.test` is what an operator's "send a test event" sends.
"""

from deliveries.catalogue import Version, declare
from deliveries.endpoints.operational_events import ENDPOINT_SUSPENDED
from deliveries.endpoints.test_event import TEST_EVENT_TYPE

declare(
    ENDPOINT_SUSPENDED,
    description="An endpoint was suspended after repeated failures or a 410 Gone; "
    "its deliveries are held until an operator resumes it.",
    versions=[
        Version(
            1,
            schema={
                "type": "object",
                "required": ["endpoint_id", "reason", "suspended_at"],
                "properties": {
                    "endpoint_id": {"type": "string", "format": "uuid"},
                    "description": {"type": "string"},
                    "reason": {"type": "string"},
                    "suspended_at": {"type": "string", "format": "date-time"},
                },
            },
            example={
                "endpoint_id": "2f6c1f0e-8a3b-4c55-9a41-3c1d2b7e9f10",
                "description": "billing service",
                "reason": "20 failed attempts in a row over 1 h",
                "suspended_at": "2026-04-15T10:12:34+00:00",
            },
        )
    ],
)

declare(
    TEST_EVENT_TYPE,
    description="A harmless event an operator sends to check one endpoint end to end.",
    versions=[
        Version(
            1,
            schema={
                "type": "object",
                "required": ["endpoint_id", "test"],
                "properties": {
                    "endpoint_id": {"type": "string"},
                    "requested_by": {"type": "string"},
                    "test": {"const": True},
                },
            },
            example={
                "endpoint_id": "2f6c1f0e-8a3b-4c55-9a41-3c1d2b7e9f10",
                "requested_by": "admin",
                "test": True,
            },
        )
    ],
)
