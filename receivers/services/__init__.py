"""Services of the receiving side: the only place where its business rules live."""

from receivers.services.arrival import (
    Arrival,
    expectation_mismatch,
    inbox_record,
    inbox_record_batch,
)
from receivers.services.processing import (
    InboxNotRetryable,
    InboxOutcome,
    inbox_claim,
    inbox_fail_spent,
    inbox_process,
    inbox_process_many,
    inbox_retry,
)
from receivers.services.sources import (
    InvalidSecret,
    SecretRequired,
    SourceDeletion,
    SourceInUse,
    SourceInvalid,
    source_create,
    source_delete,
    source_rotate_secret,
    source_update,
    source_validate,
)
from receivers.services.sweeper import InboxSweepResult, inbox_apply_retention, inbox_sweep

__all__ = [
    "Arrival",
    "InboxNotRetryable",
    "InboxOutcome",
    "InboxSweepResult",
    "InvalidSecret",
    "SecretRequired",
    "SourceDeletion",
    "SourceInUse",
    "SourceInvalid",
    "expectation_mismatch",
    "inbox_apply_retention",
    "inbox_claim",
    "inbox_fail_spent",
    "inbox_process",
    "inbox_process_many",
    "inbox_record",
    "inbox_record_batch",
    "inbox_retry",
    "inbox_sweep",
    "source_create",
    "source_delete",
    "source_rotate_secret",
    "source_update",
    "source_validate",
]
