"""What a finished request comes to: a destination's outcome turned into the record the
owner writes (`Result`), decided by the retry policy, with no secret in its error text."""

import logging
import math
from dataclasses import dataclass, field

from django.utils import timezone

from deliveries import conf
from deliveries.destinations import Credentials, Kind, Outcome
from deliveries.endpoints.headers import MASK
from deliveries.models import Attempt, CircuitState, Delivery, Endpoint
from deliveries.pipeline.owner.gate import Gate
from deliveries.pipeline.record import Result
from webhooks_core.retry_policy import Decision, Verdict, decide

logger = logging.getLogger("deliveries.pipeline.owner")


def defer_seconds(outcome: Outcome) -> float:
    """How long a deferred delivery waits: what its destination said (seconds, in
    `retry_after`), else `WEBHOOKS_DEFER_SECONDS`; never less than that (a destination
    saying 0 would have its owner claim and defer in a tight loop), nor past a
    countdown's bound."""
    least = float(conf.health().defer_seconds)
    try:
        seconds = float(outcome.retry_after or "")
    except (TypeError, ValueError):
        seconds = least
    if not math.isfinite(seconds):
        seconds = least
    return min(max(seconds, least), float(conf.get().max_countdown_seconds))


def result_of(delivery: Delivery, outcome: Outcome, credentials: Credentials) -> Result:
    """A destination's outcome as the record it makes, decided by the retry policy."""
    endpoint = delivery.endpoint
    now = timezone.now()
    error = _without_secrets(outcome.error, delivery, credentials) if outcome.error else ""
    if outcome.local_failure:
        logger.error(
            "sending a delivery failed",
            extra={"delivery": delivery.pk, "endpoint": str(delivery.endpoint_id), "error": error},
        )
    if outcome.kind == Kind.SUCCEEDED:
        decision = Decision(Verdict.SUCCEEDED)
    elif outcome.kind == Kind.DEAD and outcome.status_code is None:
        decision = Decision(Verdict.DEAD_LETTER, reason=error[:200])
    else:
        decision = decide(
            policy=endpoint.retry_policy,
            attempt_number=delivery.attempts_in_cycle,
            status_code=outcome.status_code,
            retry_after=outcome.retry_after,
            first_attempt_at=delivery.first_attempt_at or outcome.started_at or now,
            now=now,
        )
    attempt = None
    if outcome.started_at is not None:
        attempt = Attempt(
            delivery_id=delivery.id,
            number=delivery.attempts,
            started_at=outcome.started_at,
            duration_ms=outcome.duration_ms,
            request_headers=outcome.request_headers,
            response_status=outcome.status_code,
            response_body=outcome.response_body,
            error=error[:1000] if outcome.local_failure else error,
        )
    if not error and decision.verdict != Verdict.SUCCEEDED and outcome.status_code is not None:
        error = f"HTTP {outcome.status_code}"
    return Result(
        delivery,
        decision,
        status_code=outcome.status_code,
        error=error,
        attempt=attempt,
        local_failure=outcome.local_failure,
    )


def _without_secrets(text: str, delivery: Delivery, credentials: Credentials) -> str:
    """`requests`/urllib3 quote a refused header value in their messages: never store or
    log a secret one; nor a credential in a URL they quote (`masked_text`)."""
    from webhooks_core.crypto import encryption
    from webhooks_core.egress.urlmask import masked_text

    endpoint = delivery.endpoint
    hidden: list[str] = [*credentials.secrets, *credentials.private_keys]
    try:
        plain = endpoint.custom_headers_plain()
    except encryption.SecretDecryptionError:
        plain = {}  # an undecryptable header: nothing of it to quote
    hidden += [plain[name] for name in endpoint.secret_header_names if name in plain]
    for value in sorted(filter(None, hidden), key=len, reverse=True):
        for form in (value, repr(value)[1:-1]):
            text = text.replace(form, MASK)
    return masked_text(text)


def sends_before_recording(endpoint: Endpoint | None, gate: Gate, results: list[Result]) -> bool:
    """Whether the next round's requests may start before these results are recorded:
    only when all of them succeeded (nothing the endpoint's health, its breaker or a
    suspension would learn from them), the circuit is closed (a successful probe closes it
    only when recorded) and no key's next delivery waits for them (an unordered endpoint).
    Their rows stay claimed, so nobody sends them again."""
    return (
        endpoint is not None
        and not endpoint.ordered_delivery
        and endpoint.circuit_state == CircuitState.CLOSED
        and not gate.probe
        and all(r.decision.verdict == Verdict.SUCCEEDED for r in results)
    )


# The outcomes a task keeps for its caller (`endpoint_work_for_delivery`'s synchronous path).
KEPT_OUTCOMES = 100


@dataclass
class WorkResult:
    """What a task came to: its last `KEPT_OUTCOMES` outcomes, and the one it watches."""

    owned: bool = False
    sent: int = 0
    outcomes: dict[int, str] = field(default_factory=dict)
    watch: int | None = None

    def note(self, outcomes: dict[int, str]) -> None:
        self.outcomes.update(outcomes)
        while len(self.outcomes) > KEPT_OUTCOMES:
            oldest = next(iter(self.outcomes))
            if oldest == self.watch:
                # (Kept, at the end: the next oldest goes.)
                self.outcomes[oldest] = self.outcomes.pop(oldest)
                oldest = next(iter(self.outcomes))
            del self.outcomes[oldest]
