"""HTTP(S) endpoints: one signed POST per attempt, in a client span when tracing is on.

With OAuth2 client credentials the attempt first takes the shared bearer token (`oauth2`)
and, when the endpoint answers 401, refreshes it once and sends once more within the same
deadline. A token that cannot be had is a failed attempt (retried by the endpoint's
policy) that counts against its health like an unanswered request: the token server is
the endpoint's, and an endpoint whose token server is down cannot take deliveries.
"""

from datetime import datetime
from typing import TYPE_CHECKING

from django.utils import timezone

from deliveries import conf
from deliveries.destinations.base import Credentials, Kind, Outcome, signed_message
from deliveries.destinations.http_client import oauth2, transport
from deliveries.pipeline import payloads
from deliveries.pipeline.wire import redact_headers
from webhooks_core import tracing
from webhooks_core.egress.deadlines import Deadline

if TYPE_CHECKING:
    from deliveries.models import Delivery

# Answers after which the endpoint will not take this delivery, however often it is sent.
REFUSED_FOR_GOOD = frozenset({401, 403, 410})


def _kind(status_code: int | None) -> Kind:
    if status_code is not None and 200 <= status_code < 300:
        return Kind.SUCCEEDED
    if status_code in REFUSED_FOR_GOOD:
        return Kind.DEAD
    return Kind.RETRY


class HttpDestination:
    def send(self, delivery: "Delivery", deadline: Deadline, credentials: Credentials) -> Outcome:
        if not tracing.enabled():
            return self._send(delivery, deadline, credentials, None)
        with tracing.span(
            "POST",
            kind="CLIENT",
            traceparent=delivery.event.traceparent or None,
            attributes=tracing.attempt_attributes(
                url=delivery.endpoint.url,
                attempt=delivery.attempts,
                delivery_id=delivery.pk,
                endpoint_id=str(delivery.endpoint_id),
                event_id=str(delivery.event_id),
                event_type=delivery.event.type,
            ),
        ) as span:
            outcome = self._send(delivery, deadline, credentials, span)
            tracing.attempt_outcome(
                span, status_code=outcome.status_code, outcome=outcome.kind, error=outcome.error
            )
            return outcome

    def _send(
        self, delivery: "Delivery", deadline: Deadline, credentials: Credentials, span: object
    ) -> Outcome:
        endpoint = delivery.endpoint
        try:
            body, headers = signed_message(delivery, credentials, span)
        except payloads.PayloadUnavailable as exc:
            # Our storage, not the endpoint, failed: no request, no health penalty; the
            # delivery retries on its usual backoff and shows the error.
            return Outcome(Kind.RETRY, error=str(exc), local_failure=True)
        started_at = timezone.now()
        policy = conf.endpoint_address_policy(endpoint)
        proxy_url = conf.get().egress_proxy_url
        tls = endpoint.client_tls() if endpoint.url.lower().startswith("https:") else None
        client = endpoint.oauth2_credentials()
        token_policy = conf.token_url_policy(endpoint)
        secret_names = endpoint.secret_header_names

        def token(stale: str | None = None) -> str:
            assert client is not None
            return oauth2.bearer_token(
                client,
                scope_key=str(endpoint.pk),
                deadline=deadline,
                connect_timeout=endpoint.connect_timeout_seconds,
                read_timeout=endpoint.read_timeout_seconds,
                policy=token_policy,
                redis_url=conf.health().redis_url,
                proxy_url=proxy_url,
                stale=stale,
            )

        def post() -> transport.HttpResult:
            return transport.post(
                endpoint.url,
                body,
                headers,
                connect_timeout=endpoint.connect_timeout_seconds,
                read_timeout=endpoint.read_timeout_seconds,
                excerpt_limit=conf.get().response_body_limit,
                # A URL a tenant chose in the portal goes out under the portal's policy.
                policy=policy,
                deadline=deadline,
                tls=tls,
                proxy_url=proxy_url,
            )

        bearer = None
        if client is not None:
            try:
                bearer = token()
            except oauth2.TokenError as exc:
                return self._no_token(exc, started_at, headers, secret_names)
            headers["Authorization"] = f"Bearer {bearer}"
            if not deadline.rearm():
                return self._no_token(
                    oauth2.TokenError("OAuth2 token: no time left to send after fetching it"),
                    started_at,
                    headers,
                    secret_names,
                )
        response = post()
        if response.status_code == 401 and bearer is not None and deadline.rearm():
            # The token may have been revoked or rotated early: one fresh one, one more try.
            try:
                bearer = token(stale=bearer)
            except oauth2.TokenError as exc:
                return self._no_token(exc, started_at, headers, secret_names)
            headers["Authorization"] = f"Bearer {bearer}"
            if deadline.rearm():
                response = post()
        return Outcome(
            _kind(response.status_code),
            status_code=response.status_code,
            retry_after=response.retry_after,
            error=response.error,
            started_at=started_at,
            duration_ms=response.duration_ms,
            request_headers=redact_headers(headers, secret_names),
            response_body=response.body_excerpt,
        )

    @staticmethod
    def _no_token(
        exc: oauth2.TokenError,
        started_at: "datetime",
        headers: dict[str, str],
        secret_names: list[str],
    ) -> Outcome:
        return Outcome(
            Kind.RETRY,
            error=str(exc),
            started_at=started_at,
            duration_ms=(timezone.now() - started_at).total_seconds() * 1000,
            request_headers=redact_headers(headers, secret_names),
        )
