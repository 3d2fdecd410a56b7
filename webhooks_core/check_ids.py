"""Every system-check id the apps and the reference deployment report, with its one meaning.

A check names its id through :func:`check_id`, so an id is defined here once; the
troubleshooting page (docs/troubleshooting.md) explains each, and tests/docs keep the page
and this table equal. An id is never reused for another meaning: a retired one stays retired.
"""

MEANINGS: dict[str, str] = {
    "webhooks.E001": "SECRET_KEY is missing, shipped or weak with DEBUG off",
    "webhooks.W001": "ALLOWED_HOSTS contains '*' with DEBUG off",
    "webhooks.E002": "WEBHOOKS_ENCRYPTION_KEY is not set with DEBUG off",
    "webhooks.E003": "DEBUG is on in a deployment (check --deploy)",
    "webhooks.E010": "WEBHOOKS_ALLOWED_NETWORKS is not a list of CIDRs",
    "webhooks.E011": "METRICS_ALLOWED_IPS holds something that is no address or network",
    "webhooks.E012": "WEBHOOKS_EGRESS_PROXY_URL is invalid",
    "webhooks.E013": "WEBHOOKS_PORTAL_ALLOWED_NETWORKS is not a list of CIDRs",
    "webhooks.E020": "the Redis visibility_timeout is not longer than the longest countdown",
    "webhooks.W020": "CELERY_WORKER_PREFETCH_MULTIPLIER is not 1",
    "webhooks.E030": "the CloudEvents handshake has no usable origin",
    "webhooks.E031": "WEBHOOKS_PORTAL_ENDPOINT_VALIDATION is neither 'none' nor 'cloudevents'",
    "webhooks.E040": "WEBHOOKS_PORTAL_TENANT_RESOLVER cannot be imported or is not callable",
    "receivers.E001": "RECEIVERS_MAX_ATTEMPTS is below 1",
    "receivers.E002": "RECEIVERS_BACKOFF_MAX_SECONDS is below RECEIVERS_BACKOFF_BASE_SECONDS",
    "receivers.E003": "RECEIVERS_DISPATCH_BATCH_SIZE is below 1",
    "receivers.E004": "an entry of RECEIVERS_SCHEMES does not load",
    "receivers.E005": "RECEIVERS_LEASE_SECONDS or RECEIVERS_HANDLER_TIMEOUT_SECONDS is not above 0",
    "receivers.W001": "RECEIVERS_INBOX_RETENTION_DAYS is below the safe minimum",
    "receivers.W002": "RECEIVERS_BODY_RETENTION_DAYS exceeds RECEIVERS_INBOX_RETENTION_DAYS",
    "receivers.W003": "an enabled source has no active secret",
    "receivers.W004": "a source's secret cannot be decrypted with WEBHOOKS_ENCRYPTION_KEY",
    "receivers.W005": "a source holds a public key as an HMAC secret",
    "receivers.W006": "an enabled source names a scheme that is not registered",
}


def check_id(name: str) -> str:
    """`name`, once it is known to be defined above (a typo fails at import)."""
    if name not in MEANINGS:
        raise KeyError(f"{name} is no system-check id of webhooks_core.check_ids")
    return name
