"""Schemathesis against the served OpenAPI schema (issue 18): bounded and deterministic.

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
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig
from schemathesis.generation import GenerationMode

from deliveries import ssrf
from deliveries.models import ApiToken, Attempt, Delivery, Endpoint, Event, Replay
from receivers.models import InboxEvent, Source

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
# against what is stored or declared (the event-type catalogue, existing slugs, the address
# a host name resolves to). Only 400s naming these fields pass, and only there.
ENDPOINT_RULES = {"url", "event_types", "version_pins", "backoff_max_seconds", "custom_headers"}
CONTEXT_RULES: dict[tuple[str, str], set[str]] = {
    ("POST", "/api/v1/events"): {"type", "data", "version"},
    ("POST", "/api/v1/replays"): {"until", "event_types", "endpoint_ids"},
    # ... and header names: OpenAPI 3.0 has no `propertyNames`.
    ("POST", "/api/v1/endpoints"): ENDPOINT_RULES,
    ("PATCH", "/api/v1/endpoints/{id}"): ENDPOINT_RULES,
    ("POST", "/api/v1/sources"): {"slug", "secret"},
}


@schema.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    if type(failure).__name__ != "RejectedPositiveData" or response.status_code != 400:
        return True
    allowed = CONTEXT_RULES.get((case.operation.method.upper(), case.operation.path), set())
    try:
        named = set(json.loads(response.content))
    except ValueError:
        return True
    return not (named and named <= allowed)


@pytest.fixture
def stored(transactional_db: None, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """One row of every kind the API serves, by the first segment of its path."""
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
    return {
        "endpoints": str(endpoint.pk),
        "events": str(event.pk),
        "deliveries": str(delivery.pk),
        "sources": str(source.pk),
        "inbox": str(inbox.pk),
        "replays": str(replay.pk),
    }


@pytest.fixture
def token(transactional_db: None) -> str:
    _, plain = ApiToken.issue("schemathesis")
    return plain


def aim_at_stored_row(case: Any, stored: dict[str, str]) -> None:
    """Every other conforming case names a stored row instead of a made-up id.

    Only conforming cases: in a schema-violating one the id may be the part that violates,
    and a real id there would turn it into a valid request.
    """
    if case.meta is None or case.meta.generation.mode is not GenerationMode.POSITIVE:
        return
    given = (case.path_parameters or {}).get("id")
    if given is None or zlib.crc32(str(given).encode()) % 2:
        return
    collection = case.operation.path.removeprefix("/api/v1/").split("/")[0]
    case.path_parameters["id"] = stored[collection]


@schema.parametrize()
# The token and the stored rows are meant to live across one operation's examples.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_api_conforms_to_its_schema(case: Any, token: str, stored: dict[str, str]) -> None:
    aim_at_stored_row(case, stored)
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"})
