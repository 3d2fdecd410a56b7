"""The envelopes an endpoint can ask for (pure rendering, no database)."""

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from deliveries.pipeline import rendering

MOMENT = datetime(2026, 4, 15, 12, 12, 34, tzinfo=timezone(timedelta(hours=2)))
FIELDS: dict[str, Any] = {
    "event_id": "0b0e7f5c-0000-4000-8000-000000000001",
    "event_type": "invoice.paid",
    "version": 3,
    "occurred_at": MOMENT,
    "data": {"amount": 1},
}


def test_default_envelope_is_unchanged() -> None:
    assert rendering.envelope("default", **FIELDS) == {
        "id": FIELDS["event_id"],
        "type": "invoice.paid",
        "version": 3,
        "occurred_at": "2026-04-15T10:12:34Z",
        "data": {"amount": 1},
    }
    assert rendering.content_type("default") == "application/json"


def test_cloudevents_structured_mode() -> None:
    document = rendering.envelope("cloudevents", source="urn:shop", **FIELDS)
    assert document == {
        "specversion": "1.0",
        "id": FIELDS["event_id"],
        "source": "urn:shop",
        "type": "invoice.paid",
        "time": "2026-04-15T10:12:34Z",
        "datacontenttype": "application/json",
        "dataversion": 3,
        "data": {"amount": 1},
    }
    assert rendering.content_type("cloudevents") == "application/cloudevents+json"
    # CloudEvents 1.0: attribute names are lower-case ASCII letters and digits, at most 20.
    assert all(re.fullmatch(r"[a-z0-9]{1,20}", name) for name in document)
    assert datetime.fromisoformat(document["time"]).astimezone(UTC) == MOMENT


def test_an_unknown_envelope_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown envelope"):
        rendering.envelope("soap", **FIELDS)
