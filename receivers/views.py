"""The receiving endpoint, ``/receivers/<slug>/``: a short pipeline, the same for every scheme.

    source -> size limit -> raw body
    -> signature headers (count, form, timestamp window: no cryptography yet)
    -> signature (every active secret, constant time)
    -> [challenge: answered, not stored] -> envelope(s)
    -> INSERT ... ON CONFLICT DO NOTHING (a batch: all in one transaction) -> COMMIT -> 200

``HEAD`` (providers probing the URL) answers 200 and ``GET`` 405 whatever the slug, before
any lookup, so neither tells which sources exist.

Each step either passes or ends the request with a fixed answer; only the envelope step
says what was wrong (the caller is authenticated by then). 2xx means the event is
committed; when the database cannot take it the answer is 503 so the provider retries.
"""

import hashlib
import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import DisallowedHost
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from receivers import kept_source, schemes, selectors, services
from receivers.metrics import RequestOutcome, count_request, observe_delivery_lag
from receivers.models import Source
from webhooks_core import tracing
from webhooks_core.crypto.encryption import SecretDecryptionError

logger = logging.getLogger(__name__)

#: Never stored with the inbox row, whatever the scheme.
ALWAYS_DROPPED_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
#: Nor any header whose name says it carries a credential (X-Api-Key, X-Auth-Token, ...):
#: a provider or a proxy may add one we have never heard of.
CREDENTIAL_HEADER = re.compile(
    r"api[-_]?key|token|secret|passw|auth|cookie|session|credential|signature", re.IGNORECASE
)
DB_RETRY_AFTER_SECONDS = 30


class SchemeMissing(Exception):
    """The source names a scheme the registry does not hold (a configuration error)."""


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
    found: selectors.SourceForRequest | None = None
    try:
        found = kept_source.kept_or_looked_up(request.META, slug)
        if found is None:
            raise Reject(404, RequestOutcome.NOT_FOUND, "unknown source")
        outcome, response = _accept(request, found)
    except Reject as reject:
        scheme = found.source.scheme if found is not None else "-"
        count_request(slug if reject.status != 404 else "-", reject.outcome, scheme=scheme)
        logger.warning(
            "webhook rejected: %s", reject.outcome, extra={"source": slug, "scheme": scheme}
        )
        return JsonResponse({"detail": reject.detail}, status=reject.status)
    except SchemeMissing:
        scheme = found.source.scheme if found is not None else "-"
        count_request(slug, RequestOutcome.SCHEME_MISSING, scheme=scheme)
        return _unavailable()
    except (OperationalError, InterfaceError):
        # Nothing was stored: the provider must deliver again.
        scheme = found.source.scheme if found is not None else "-"
        count_request(slug, RequestOutcome.DB_UNAVAILABLE, scheme=scheme)
        logger.exception(
            "webhook not stored: database unavailable", extra={"source": slug, "scheme": scheme}
        )
        return _unavailable()
    count_request(slug, outcome, scheme=found.source.scheme)
    return response


def _unavailable() -> HttpResponse:
    response = JsonResponse({"detail": "temporarily unavailable"}, status=503)
    response["Retry-After"] = str(DB_RETRY_AFTER_SECONDS)
    return response


def _accept(request: HttpRequest, found: selectors.SourceForRequest) -> tuple[str, HttpResponse]:
    source = found.source
    try:
        scheme = schemes.get(source.scheme)
    except KeyError:
        # RECEIVERS_SCHEMES lost the source's scheme (a deploy without it, or a bad entry:
        # system check receivers.E004). The provider retries; nothing is lost meanwhile.
        logger.error(
            "source's scheme is not registered (RECEIVERS_SCHEMES)",
            extra={"source": source.slug, "scheme": source.scheme},
        )
        raise SchemeMissing from None
    body = _read_body(request, source.max_body_bytes)
    headers = schemes.Headers(request.headers)
    url = called_url(request, source) if scheme.signs_url else ""
    # Before any key touches the body (see schemes.screen).
    parts = _screen(scheme, headers, source, url=url)
    verified = _verify(scheme, headers, body, source, _active_secrets(found), parts)
    try:
        challenge = scheme.challenge(headers, body, verified.parts)
        if challenge is not None:
            logger.info(
                "webhook %s",
                RequestOutcome.CHALLENGE,
                extra={"source": source.slug, "scheme": scheme.name},
            )
            response = HttpResponse(challenge.body, content_type=challenge.content_type)
            return RequestOutcome.CHALLENGE, response
        envelopes = scheme.envelopes(headers, body, verified.parts)
        if not envelopes:
            raise schemes.MalformedEnvelope("the request carries no event")
    except schemes.MalformedEnvelope as exc:
        raise Reject(400, RequestOutcome.MALFORMED, str(exc)) from None
    kept_headers = stored_headers(request.headers, scheme.signature_headers)
    digest = _replay_digest(scheme, verified.parts, body, len(envelopes))
    try:
        arrivals = _record(source, envelopes, kept_headers, body, digest)
    except IntegrityError:
        # The source was deleted while this request was on its way (services.source_delete):
        # nothing was stored (a batch neither), and the source is now unknown.
        if Source.objects.filter(pk=source.pk).exists():
            raise
        raise Reject(404, RequestOutcome.NOT_FOUND, "unknown source") from None
    for envelope, arrival in zip(envelopes, arrivals, strict=True):
        if arrival.created:
            observe_delivery_lag(source.slug, envelope.provider_timestamp)
    outcome = _outcome(arrivals)
    stored = sum(arrival.created for arrival in arrivals)
    tracing.annotate_current(
        {
            "webhooks.event.id": envelopes[0].event_id,
            "webhooks.event.type": envelopes[0].type,
            "webhooks.outcome": str(outcome),
            **({"webhooks.batch.size": len(envelopes)} if len(envelopes) > 1 else {}),
        }
    )
    context = {"source": source.slug, "scheme": scheme.name}
    if len(envelopes) == 1:
        context.update(event_id=envelopes[0].event_id, event_type=envelopes[0].type)
        logger.info("webhook %s", outcome, extra=context)
    else:
        # One line per batch (a SendGrid batch can hold a thousand events), with its span.
        logger.info(
            "webhook batch %s",
            outcome,
            extra={
                **context,
                "events": len(envelopes),
                "stored": stored,
                "first_event_id": envelopes[0].event_id,
                "last_event_id": envelopes[-1].event_id,
            },
        )
    answer: dict[str, Any] = {"status": outcome}
    if len(envelopes) > 1:
        answer["events"] = len(envelopes)
        answer["stored"] = stored
    return outcome, JsonResponse(answer, status=200)


def _replay_digest(scheme: schemes.Scheme, parts: schemes.SignedParts, body: bytes, n: int) -> str:
    """The SHA-256 of the signed material the inbox deduplicates on besides the ids: a
    whole batch's body (a replayed batch is one lookup), or, for a scheme that signs no
    timestamp, what it signs (its id and type come from headers it does not sign)."""
    if n > 1:
        return hashlib.sha256(body).hexdigest()
    if scheme.has_timestamp:
        return ""
    return hashlib.sha256(scheme.signed_material(parts, body)).hexdigest()


def _record(
    source: Source,
    envelopes: list[schemes.Envelope],
    headers: dict[str, str],
    body: bytes,
    digest: str,
) -> list[services.Arrival]:
    if len(envelopes) == 1:
        [envelope] = envelopes
        raw = body if envelope.raw_body is None else envelope.raw_body
        return [
            services.inbox_record(
                source=source,
                envelope=envelope,
                headers=headers,
                raw_body=raw,
                signed_digest=digest,
            )
        ]
    return services.inbox_record_batch(
        source=source, envelopes=envelopes, headers=headers, raw_body=body, signed_digest=digest
    )


def _outcome(arrivals: list[services.Arrival]) -> str:
    """A duplicate when nothing was new; ignored when everything new was ignored."""
    created = [arrival for arrival in arrivals if arrival.created]
    if not created:
        return RequestOutcome.DUPLICATE
    if all(arrival.status == "ignored" for arrival in created):
        return RequestOutcome.IGNORED
    return RequestOutcome.ACCEPTED


def called_url(request: HttpRequest, source: Source) -> str:
    """The URL the provider called, for schemes that sign it: the source's ``public_url``
    (behind a proxy the request's own URL is not the one the provider signed) followed by
    the request's query string, else the request's absolute URL."""
    if source.public_url:
        query = request.META.get("QUERY_STRING", "")
        return f"{source.public_url}?{query}" if query else source.public_url
    try:
        return request.build_absolute_uri()
    except DisallowedHost:
        raise Reject(400, RequestOutcome.MALFORMED, "invalid Host header") from None


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
    scheme: schemes.Scheme, headers: schemes.Headers, source: Source, *, url: str = ""
) -> schemes.SignedParts:
    try:
        return schemes.screen(
            scheme, headers, now=time.time(), tolerance_seconds=source.tolerance_seconds, url=url
        )
    except schemes.TooManySignatures:
        detail = f"too many signatures (at most {schemes.MAX_SIGNATURES})"
        raise Reject(400, RequestOutcome.MALFORMED, detail) from None
    except schemes.MalformedEnvelope as exc:
        # A signature header not in the provider's documented format (MalformedHeader):
        # the message names the header and its format, both public.
        raise Reject(400, RequestOutcome.MALFORMED, str(exc)) from None
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
            parts=parts,  # screened: the window and the headers' form are checked
        )
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
