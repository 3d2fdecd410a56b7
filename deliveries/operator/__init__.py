"""What operators do, apart from the pipeline: retry, dead letters, replay, bulk retry,
erasure, the audit log, tenants' settings."""
