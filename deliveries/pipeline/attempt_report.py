"""What the sending path tells operators about each attempt: metrics and one log line.

Called once per finished attempt from ``record.record_rounds`` (the owners'
rounds, written together by ``group_commit``), after the ``atomic``
block that wrote them. The log line carries the event id as the correlation id (it is
also ``X-Webhook-Id``), never the payload, headers or secrets.
"""

import logging

from django.utils import timezone

from deliveries import metrics
from deliveries.models import Attempt, Delivery

logger = logging.getLogger("deliveries.attempts")


def attempt_recorded(
    *,
    delivery: Delivery,
    attempt: Attempt | None,
    outcome: str,
    status_code: int | None,
    error: str,
) -> None:
    # The outcome is committed already: a metrics or logging failure must not fail the task.
    try:
        _record(delivery, attempt, outcome, status_code, error)
    except Exception:
        logger.exception("recording the attempt failed", extra={"event_id": str(delivery.event_id)})


def _record(
    delivery: Delivery, attempt: Attempt | None, outcome: str, status_code: int | None, error: str
) -> None:
    endpoint_id = str(delivery.endpoint_id)
    if attempt is not None:
        metrics.attempts_total.labels(status_class=metrics.status_class(status_code)).inc()
        metrics.attempt_duration_seconds.observe(attempt.duration_ms / 1000)
    if outcome in metrics.FINAL_OUTCOMES:
        metrics.deliveries_total.labels(endpoint=endpoint_id, outcome=outcome).inc()
    # Replays and manual retries would report the age of an old event, not a delay.
    if outcome == "succeeded" and not delivery.is_replay and not delivery.attempts_before_cycle:
        latency = (timezone.now() - delivery.event.created_at).total_seconds()
        metrics.delivery_latency_seconds.observe(max(latency, 0.0))
    level = logging.WARNING if outcome == "dead_lettered" else logging.INFO
    if not logger.isEnabledFor(level):
        return  # (its fields are not gathered for nothing, once per attempt)
    logger.log(
        level,
        "webhook attempt %s",
        outcome,
        extra={
            "event_id": str(delivery.event_id),
            "event_type": delivery.event.type,
            "delivery_id": delivery.pk,
            "endpoint_id": endpoint_id,
            "attempt": attempt.number if attempt is not None else delivery.attempts,
            "status_code": status_code,
            "duration_ms": round(attempt.duration_ms, 1) if attempt is not None else None,
            "outcome": outcome,
            "error": error[:500],
        },
    )
