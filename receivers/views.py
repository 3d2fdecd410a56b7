"""The receiving endpoint, ``/receivers/<slug>/``: a short pipeline, the same for every scheme.

    source -> size limit -> raw body
    -> signature headers (count, form, timestamp window: no cryptography yet)
    -> signature (every active secret, constant time) -> envelope
    -> INSERT ... ON CONFLICT DO NOTHING -> COMMIT -> 200

``HEAD`` (providers probing the URL) answers 200 and ``GET`` 405 whatever the slug, before
any lookup, so neither tells which sources exist.

Each step either passes or ends the request with a fixed answer; only the envelope step
says what was wrong (the caller is authenticated by then). 2xx means the event is
committed; when the database cannot take it the answer is 503 so the provider retries.
"""

import logging
import re
import time
from collections.abc import Mapping

from django.db import InterfaceError, OperationalError, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from deliveries import tracing
from webhooks_core.crypto import SecretDecryptionError

from . import schemes, selectors, services
from .metrics import RequestOutcome, count_request, observe_delivery_lag
from .models import Source

logger = logging.getLogger(__name__)

#: Never stored with the inbox row, whatever the scheme.
ALWAYS_DROPPED_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
#: Nor any header whose name says it carries a credential (X-Api-Key, X-Auth-Token, ...):
#: a provider or a proxy may add one we have never heard of.
CREDENTIAL_HEADER = re.compile(
    r"api[-_]?key|token|secret|passw|auth|cookie|session|credential|signature", re.IGNORECASE
)
DB_RETRY_AFTER_SECONDS = 30


class Reject(Exception):
    def __init__(self, status: int, outcome: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.outcome = outcome
        self.detail = detail


@csrf_exempt
# 2xx must mean committed: the inbox insert commits on its own even under ATOMIC_REQUESTS.
@transaction.non_atomic_requests
def receive(request: HttpRequest, slug: str) -> HttpResponse:
    with tracing.span(
        f"{request.method} /receivers/<slug>/",
        kind="SERVER",
        traceparent=tracing.from_header(request.headers.get("traceparent")),
        attributes={
            "http.request.method": request.method,
            "http.route": "/receivers/<slug>/",
            "webhooks.source": slug,
        },
    ) as span:
        response = _receive(request, slug)
        tracing.set_attributes(span, {"http.response.status_code": response.status_code})
        if response.status_code >= 500:
            tracing.mark_error(span, str(response.status_code))
        return response


def _receive(request: HttpRequest, slug: str) -> HttpResponse:
    if request.method == "HEAD":
        # The same answer for every slug, existing or not: a probe learns nothing.
        return HttpResponse(status=200)
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST", "HEAD"])
    try:
        found = selectors.source_for_request(slug=slug, now=timezone.now())
        if found is None:
            raise Reject(404, RequestOutcome.NOT_FOUND, "unknown source")
        outcome, body = _accept(request, found)
    except Reject as reject:
        count_request(slug if reject.status != 404 else "-", reject.outcome)
        logger.warning("webhook rejected: %s", reject.outcome, extra={"source": slug})
        return JsonResponse({"detail": reject.detail}, status=reject.status)
    except (OperationalError, InterfaceError):
        # Nothing was stored: the provider must deliver again.
        count_request(slug, RequestOutcome.DB_UNAVAILABLE)
        logger.exception("webhook not stored: database unavailable", extra={"source": slug})
        response = JsonResponse({"detail": "temporarily unavailable"}, status=503)
        response["Retry-After"] = str(DB_RETRY_AFTER_SECONDS)
        return response
    count_request(slug, outcome)
    return JsonResponse(body, status=200)


def _accept(request: HttpRequest, found: selectors.SourceForRequest) -> tuple[str, dict[str, str]]:
    source = found.source
    scheme = schemes.get(source.scheme)
    body = _read_body(request, source.max_body_bytes)
    headers = schemes.Headers(request.headers)
    # Before any key touches the body (see schemes.screen).
    parts = _screen(scheme, headers, source)
    verified = _verify(scheme, headers, body, source, _active_secrets(found), parts)
    try:
        envelope = scheme.envelope(headers, body, verified.parts)
    except schemes.MalformedEnvelope as exc:
        raise Reject(400, RequestOutcome.MALFORMED, str(exc)) from None
    arrival = services.inbox_record(
        source=source,
        envelope=envelope,
        headers=stored_headers(request.headers, scheme.signature_headers),
        raw_body=body,
    )
    if arrival.created:
        observe_delivery_lag(source.slug, envelope.provider_timestamp)
    if not arrival.created:
        outcome = RequestOutcome.DUPLICATE
    elif arrival.status == "ignored":
        outcome = RequestOutcome.IGNORED
    else:
        outcome = RequestOutcome.ACCEPTED
    tracing.annotate_current(
        {
            "webhooks.event.id": envelope.event_id,
            "webhooks.event.type": envelope.type,
            "webhooks.outcome": str(outcome),
        }
    )
    logger.info(
        "webhook %s",
        outcome,
        extra={"source": source.slug, "event_id": envelope.event_id, "event_type": envelope.type},
    )
    return outcome, {"status": outcome}


def _read_body(request: HttpRequest, limit: int) -> bytes:
    """The raw bytes, never more than ``limit`` + 1 of them read."""
    if (
        not request.META.get("CONTENT_LENGTH")
        and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
    ):
        return _read_chunked(request, limit)
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if not declared.isdigit():
        raise Reject(400, RequestOutcome.MALFORMED, "invalid Content-Length")
    if int(declared) > limit:
        raise Reject(413, RequestOutcome.TOO_LARGE, "body too large")
    body = request.read(limit + 1)
    if len(body) > limit:
        raise Reject(413, RequestOutcome.TOO_LARGE, "body too large")
    return body


def _read_chunked(request: HttpRequest, limit: int) -> bytes:
    """A ``Transfer-Encoding: chunked`` body, which Django reads as empty (no length).

    Only a server that decodes the chunks and ends the input stream with the body says so
    with ``wsgi.input_terminated`` (gunicorn does); on any other, reading on would block
    or return the raw framing, so the provider is asked for a length (411) instead.
    """
    if not request.META.get("wsgi.input_terminated"):
        raise Reject(411, RequestOutcome.MALFORMED, "Content-Length required")
    stream = request.META["wsgi.input"]
    chunks, size = [], 0
    while size <= limit:
        chunk = stream.read(min(64 * 1024, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise Reject(413, RequestOutcome.TOO_LARGE, "body too large")
    return b"".join(chunks)


def _screen(
    scheme: schemes.Scheme, headers: schemes.Headers, source: Source
) -> schemes.SignedParts:
    try:
        return schemes.screen(
            scheme, headers, now=time.time(), tolerance_seconds=source.tolerance_seconds
        )
    except schemes.TooManySignatures:
        detail = f"too many signatures (at most {schemes.MAX_SIGNATURES})"
        raise Reject(400, RequestOutcome.MALFORMED, detail) from None
    except schemes.TimestampOutOfWindow:
        raise Reject(401, RequestOutcome.REPLAY_REJECTED, "unauthorized") from None
    except schemes.VerificationError:
        raise Reject(401, RequestOutcome.SIGNATURE_FAILED, "unauthorized") from None


def _verify(
    scheme: schemes.Scheme,
    headers: schemes.Headers,
    body: bytes,
    source: Source,
    secrets: list[str],
    parts: schemes.SignedParts,
) -> schemes.Verified:
    if not secrets:
        logger.error(
            "source has no active secret: every request is refused", extra={"source": source.slug}
        )
    try:
        return schemes.verify(
            scheme,
            headers,
            body,
            secrets,
            now=time.time(),
            tolerance_seconds=source.tolerance_seconds,
            parts=parts,
        )
    except schemes.TimestampOutOfWindow:
        raise Reject(401, RequestOutcome.REPLAY_REJECTED, "unauthorized") from None
    except schemes.VerificationError:
        raise Reject(401, RequestOutcome.SIGNATURE_FAILED, "unauthorized") from None


def _active_secrets(found: selectors.SourceForRequest) -> list[str]:
    values = []
    for secret in found.secrets:
        try:
            values.append(secret.value)
        except SecretDecryptionError:
            logger.error(
                "source secret cannot be decrypted with the configured keys",
                extra={"source": found.source.slug, "secret": secret.fingerprint},
            )
    return values


def stored_headers(
    headers: Mapping[str, str], signature_headers: tuple[str, ...]
) -> dict[str, str]:
    """Request headers worth keeping: everything but signatures and credentials."""
    dropped = ALWAYS_DROPPED_HEADERS | {name.lower() for name in signature_headers}
    return {
        name: value
        for name, value in headers.items()
        if name.lower() not in dropped and not CREDENTIAL_HEADER.search(name)
    }
