from .inbox import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_TOLERANCE_SECONDS,
    TERMINAL_STATUSES,
    InboxEvent,
    InboxStatus,
    Scheme,
    Source,
    SourceSecret,
)

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_TOLERANCE_SECONDS",
    "TERMINAL_STATUSES",
    "InboxEvent",
    "InboxStatus",
    "Scheme",
    "Source",
    "SourceSecret",
]
