from receivers.models.inbox import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_TOLERANCE_SECONDS,
    FINISHED_STATUSES,
    TERMINAL_STATUSES,
    InboxEvent,
    InboxStatus,
    Source,
    SourceSecret,
)

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_TOLERANCE_SECONDS",
    "FINISHED_STATUSES",
    "TERMINAL_STATUSES",
    "InboxEvent",
    "InboxStatus",
    "Source",
    "SourceSecret",
]
