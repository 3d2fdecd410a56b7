"""Schemathesis against the served OpenAPI schema: bounded and deterministic.

Every operation of ``GET /api/v1/schema`` is called in-process through the WSGI
application, with a valid token, with the default checks: no 5xx, only documented
statuses, bodies and headers as documented, schema-violating requests refused, schema-
conforming ones accepted. Each operation starts from a few stored rows of every kind, and
every other conforming request names one of them, so answers with real data are checked
too, not only 404s.
"""

import base64
import json
import os
import re
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatch
from typing import Any
from urllib.parse import urlencode

import pytest
import redis
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig
from schemathesis.generation import GenerationMode

from deliveries.models import (
    ApiToken,
    Attempt,
    Delivery,
    Endpoint,
    ErasureStatus,
    Event,
    Replay,
    TenantErasure,
)
from receivers.models import InboxEvent, Source
from webhooks_core.egress import ssrf

# Bounded for a loaded 2-core machine: about a minute and a half for all operations. A
# deeper run by hand: SCHEMATHESIS_MAX_EXAMPLES=500 make test PYTEST_ARGS=<this file>.
MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "25"))

CONFIG = SchemathesisConfig.from_dict(
    {
        "seed": 18,
        "generation": {
            "max-examples": MAX_EXAMPLES,
            "deterministic": True,
            "database": "none",
            # Unknown query parameters are ignored, as most HTTP APIs do (cache busters).
            "allow-extra-parameters": False,
            # No string may hold U+0000 (DRF refuses it in every text field, PostgreSQL in
            # jsonb); the API page says so once rather than a pattern on every string.
            "allow-x00": False,
        },
    }
)
schema = schemathesis.openapi.from_wsgi("/api/v1/schema", get_wsgi_application(), config=CONFIG)


def _cursor(offset: int, reverse: bool, position: datetime | None) -> str:
    """A cursor as the server gives them out in `next` (DRF's: base64 of a query string)."""
    tokens = {"o": str(offset)} if offset else {}
    if reverse:
        tokens["r"] = "1"
    if position is not None:
        tokens["p"] = position.isoformat()
    return base64.b64encode(urlencode(tokens).encode("ascii")).decode("ascii")


# `format: cursor` is the server's own: what it enforces, no JSON Schema keyword can say.
schemathesis.openapi.format(
    "cursor",
    st.builds(
        _cursor,
        offset=st.integers(0, 2000),
        reverse=st.booleans(),
        position=st.none() | st.datetimes(timezones=st.just(UTC)),
    ).filter(bool),
)

# Refusals of conforming requests for rules no schema can carry: between two fields, or
# against what is stored or declared (the event-type catalogue, existing rows, the address a
# host name resolves to), or beyond what OpenAPI 3.0 can say (names of an object's keys,
# "printable"). A 400 passes only when every message in it is one of these, for its field;
# the schema's descriptions name them. {operation: {field (fnmatch): message (regex)}}
# The filter syntax (`*`, `a.b`, `a.*`) with Python's idea of white space, and the catalogue.
FILTER_RULES = (
    r"matches no declared event type|white space|is not a dotted event-type name"
    r"|'\*' is allowed only|must be a non-empty string"
)
ENDPOINT_RULES = {
    # Django's URL validator, the SSRF guard and the address a made-up name resolves to.
    "url": r".",
    "event_types": FILTER_RULES,
    "version_pins": r"is not a declared event type|has versions",
    "backoff_max_seconds": r"at least backoff_base_seconds",
    "custom_headers": r"is not a valid header name|is set by the sender|is given twice"
    r"|has no stored secret value"
    # Generated from the value pattern by Python's re, where "$" also matches before a
    # final newline: "x\n" conforms there, and the server refuses the line break.
    r"|The value of .* has a control character",
    "secret_headers": r"is not one of the custom headers|may not be blank",
    # The payload filter's language (fields, operators, depth) is the filters page's, not
    # the schema's: the schema says only that it is an object or null.
    "filter": r".",
    # Against what is stored: an endpoint's tenant is set once, at creation.
    "tenant": r"cannot be changed",
    # Against what is stored: an endpoint's mode is set once, at creation.
    "mode": r"cannot be changed",
    # Delivery auth: the SSRF guard on token_url; a client secret is needed when none is
    # stored (or when token_url or url moves to another origin); a final line break that
    # Python's "$" lets through the no-control-characters pattern.
    "auth": r"^token_url: |Give \"client_secret\"|another origin|contains control characters"
    # OAuth2 is HTTP's: a broker URL takes none.
    r"|needs an http\(s\) URL",
    # The CloudEvents handshake is HTTP's OPTIONS: a broker URL (the url's scheme, not the
    # field's) cannot ask for it.
    # Without an origin (a setting) the handshake is unavailable.
    "validation": r"needs an http\(s\) URL|handshake is unavailable",
    # PEM content, validity dates and key/certificate pairing: no schema carries them.
    "client_certificate": r".",
    "client_key": r".",
    "ca_certificates": r".",
}
CONTEXT_RULES: dict[tuple[str, str], dict[str, str]] = {
    ("POST", "/api/v1/events"): {
        "type": r"is not a declared event type",
        "version": r"is emitted in its newest version",
        "data*": r".",  # data and data.<path>: the type's JSON Schema, in the catalogue
        "ordering_key": r"printable",
    },
    ("POST", "/api/v1/replays"): {
        "until": r"must be after since",
        "endpoint_ids": r"unknown endpoint",
        "event_types": FILTER_RULES,
    },
    ("POST", "/api/v1/endpoints"): ENDPOINT_RULES,
    ("PATCH", "/api/v1/endpoints/{id}"): ENDPOINT_RULES,
    ("POST", "/api/v1/sources"): {
        "slug": r"already exists",
        "secret": r".",
        # Django's URL validator, and no query string or fragment (the description says so).
        "public_url": r".",
    },
    # At most the global retention (a setting, not in the schema).
    ("PUT", "/api/v1/tenants/{tenant}/settings"): {
        "retention_days": r"WEBHOOKS_EVENT_RETENTION_DAYS"
    },
    # Against what is stored: the endpoint's scheme must be v1a first.
    ("POST", "/api/v1/endpoints/{id}/rotate-signing-key"): {
        "signature_scheme": r"to \"v1a\" or \"v1,v1a\" first"
    },
}


def _messages(errors: Any, field: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(errors, dict):
        for key, value in errors.items():
            # List items nest under their index: they belong to the list's field.
            name = field if field and str(key).isdigit() else str(key)
            yield from _messages(value, name)
    elif isinstance(errors, list):
        for item in errors:
            yield from _messages(item, field)
    else:
        yield field, str(errors)


def refused_for_a_rule_no_schema_can_carry(operation: Any, content: bytes) -> bool:
    rules = CONTEXT_RULES.get((operation.method.upper(), operation.path), {})
    try:
        messages = list(_messages(json.loads(content)))
    except ValueError:
        return False
    return bool(messages) and all(
        any(fnmatch(field, name) and re.search(rule, text) for name, rule in rules.items())
        for field, text in messages
    )


@schema.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    """False drops the failure: only "conforming request refused" for such a rule."""
    if type(failure).__name__ != "RejectedPositiveData" or response.status_code != 400:
        return True
    return not refused_for_a_rule_no_schema_can_carry(case.operation, response.content)


@pytest.fixture
def stored(
    transactional_db: None, monkeypatch: pytest.MonkeyPatch, redis_client: redis.Redis
) -> Iterator[dict[str, str]]:
    """One row of every kind the API serves, by the first segment of its path.

    Commits are real, so emitted events dispatch their fan-out; no worker takes them, and
    the broker is emptied afterwards.
    """
    # Generated URLs name made-up hosts: resolve them to a public address, never via DNS.
    monkeypatch.setattr(ssrf, "resolve_host", lambda host, port: ["1.1.1.1"])
    now = timezone.now()
    endpoint = Endpoint.objects.create(url="https://receiver.example.com/h", event_types=["*"])
    event = Event.objects.create(type="invoice.paid", version=1, data={"n": 1}, occurred_at=now)
    delivery = Delivery.objects.create(event=event, endpoint=endpoint, next_attempt_at=now)
    Attempt.objects.create(delivery=delivery, number=1, started_at=now, duration_ms=3.0)
    # Created without an expected mode or account, as most sources are.
    source = Source.objects.create(slug="shop", scheme="ours")
    inbox = InboxEvent.objects.create(
        source=source,
        event_id="evt_1",
        type="payment.created",
        payload={},
        raw_body=b"{}",
        received_at=now,
        next_attempt_at=now,
    )
    replay = Replay.objects.create(requested_via="tests", since=now - timedelta(hours=1), until=now)
    erasure = TenantErasure.objects.create(
        tenant=None, status=ErasureStatus.DONE, requested_via="tests", completed_at=now
    )
    yield {
        "endpoints": str(endpoint.pk),
        "events": str(event.pk),
        "deliveries": str(delivery.pk),
        "sources": source.slug,
        "inbox": str(inbox.pk),
        "replays": str(replay.pk),
        "erasures": str(erasure.pk),
    }
    redis_client.flushdb()


@pytest.fixture
def schemathesis_token(transactional_db: None) -> str:
    _, plain = ApiToken.issue("schemathesis")
    return plain


def aim_at_stored_row(case: Any, stored: dict[str, str]) -> None:
    """Every other conforming case names a stored row instead of a made-up id.

    Only conforming cases: in a schema-violating one the id may be the part that violates,
    and a real id there would turn it into a valid request.
    """
    if case.meta is None or case.meta.generation.mode is not GenerationMode.POSITIVE:
        return
    # Sources are named by their slug, every other collection by its id.
    name = "slug" if "slug" in (case.path_parameters or {}) else "id"
    given = (case.path_parameters or {}).get(name)
    if given is None or zlib.crc32(str(given).encode()) % 2:
        return
    collection = case.operation.path.removeprefix("/api/v1/").split("/")[0]
    case.path_parameters[name] = stored[collection]


@schema.parametrize()
# The token and the stored rows are meant to live across one operation's examples.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_api_conforms_to_its_schema(
    case: Any, schemathesis_token: str, stored: dict[str, str]
) -> None:
    aim_at_stored_row(case, stored)
    case.call_and_validate(headers={"Authorization": f"Bearer {schemathesis_token}"})
