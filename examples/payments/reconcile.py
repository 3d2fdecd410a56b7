"""Example reconciler: payments stuck in pending/processing, checked against our own
sender's HTTP API (``GET /api/v1/events``, bearer token), applied through
``payment_apply_state`` exactly as a webhook would be."""

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from receivers.models import Source
from receivers.reconciliation import ReconcileResult, provider_pages, reconciler

from .models import Payment, PaymentStatus
from .payments import TYPE_TO_STATUS, PaymentFacts, payment_apply_state

logger = logging.getLogger(__name__)

#: A payment must have waited this long before we ask (webhooks usually win the race).
STALE_AFTER_SECONDS = 60.0
MAX_PAGES = 20


@dataclass(frozen=True)
class SenderApiClient:
    base_url: str
    token: str

    def latest_payment_facts(self) -> dict[str, PaymentFacts]:
        """The newest reported state of every payment in the sender's recent events."""
        latest: dict[str, PaymentFacts] = {}
        pages = provider_pages(
            base_url=self.base_url,
            token=self.token,
            first_url=self.base_url.rstrip("/") + "/api/v1/events?limit=200",
            max_pages=MAX_PAGES,
        )
        for page in pages:
            for event in page.get("results", []):
                facts = _facts(event)
                if facts is None:
                    continue
                known = latest.get(facts.provider_payment_id)
                if known is None or facts.version > known.version:
                    latest[facts.provider_payment_id] = facts
        return latest


def _facts(event: dict[str, object]) -> PaymentFacts | None:
    status = TYPE_TO_STATUS.get(str(event.get("type")))
    data = event.get("data")
    if status is None or not isinstance(data, dict):
        return None
    payment_id, version = data.get("payment_id"), data.get("version", 0)
    if not isinstance(payment_id, str) or not isinstance(version, int):
        return None
    return PaymentFacts(provider_payment_id=payment_id, status=status, version=version)


@reconciler("ours")
def reconcile_payments(source: Source) -> ReconcileResult:
    result = ReconcileResult()
    cutoff = timezone.now() - timedelta(seconds=STALE_AFTER_SECONDS)
    stuck = list(
        Payment.objects.filter(
            source=source,
            status__in=[PaymentStatus.PENDING, PaymentStatus.PROCESSING],
            updated_at__lte=cutoff,
        ).values_list("provider_payment_id", flat=True)[:500]
    )
    if not stuck:
        return result
    truth = SenderApiClient(source.api_base_url, source.api_token).latest_payment_facts()
    for payment_id in stuck:
        result.checked += 1
        facts = truth.get(payment_id)
        if facts is None:
            result.unknown += 1
            continue
        if payment_apply_state(source_id=source.pk, facts=facts, via="reconcile") == "changed":
            result.changed += 1
    logger.info("payments reconciled", extra={"source": source.slug, **vars(result)})
    return result
