"""The examples for the endpoint options, run as printed: the v1a verifier on the wire-format
page against requests our sender signs, and the filter and CloudEvents examples on the
options page against our filter compiler, our renderer and the CloudEvents SDK."""

import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deliveries.pipeline import payload_filters, rendering
from tests.docs.wire_format import BODY, MSG_ID, python_verifier
from webhooks_core.crypto import signing

OPTIONS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "sending" / "options.md"
SNIPPET = re.compile(r"<!-- snippet: (?P<name>[\w-]+) -->\n```\w+\n(?P<code>.*?)\n```", re.S)


def options_snippets() -> dict[str, str]:
    return {m["name"]: m["code"] for m in SNIPPET.finditer(OPTIONS_PAGE.read_text())}


def signed(private_keys: list[str], *, timestamp: int, scheme: str = "v1a") -> dict[str, str]:
    headers = signing.signature_headers(
        [signing.generate_secret()],
        msg_id=MSG_ID,
        timestamp=timestamp,
        body=BODY,
        scheme=scheme,
        private_keys=private_keys,
    )
    return {**headers, "webhook-id": MSG_ID, "webhook-timestamp": str(timestamp)}


def test_v1a_python_verifies_exactly_our_signatures() -> None:
    verify: Callable[..., bool] = python_verifier("v1a-python")
    old_private, old_public = signing.generate_key_pair()
    new_private, new_public = signing.generate_key_pair()
    now = int(time.time())
    good = signed([new_private], timestamp=now)
    rotation = signed([old_private, new_private], timestamp=now)
    assert verify(new_public, good, BODY) is True
    assert verify(new_public, rotation, BODY) is True
    assert verify(old_public, rotation, BODY) is True
    assert verify(new_public, signed([new_private], timestamp=now, scheme="v1,v1a"), BODY)
    assert verify(new_public, good, BODY.replace(b"Zo", b"Jo")) is False
    assert verify(old_public, good, BODY) is False
    assert verify(new_public, signed([new_private], timestamp=now - 3600), BODY) is False
    assert verify(new_public, signed([new_private], timestamp=now, scheme="v1"), BODY) is False


def test_the_filter_example_is_valid_and_means_what_the_page_says() -> None:
    document = json.loads(options_snippets()["filter-example"])
    predicate = payload_filters.compile_filter(document)
    event: dict[str, Any] = {
        "type": "invoice.paid",
        "data": {"amount": 150, "currency": "EUR", "customer": {"vip": False}, "country": "FR"},
    }
    assert predicate(event)
    assert not predicate({**event, "data": {**event["data"], "amount": 99}})
    other = {**event["data"], "country": "DE", "customer": {"vip": True, "email": "a@EXAMPLE.com"}}
    assert predicate({**event, "data": other})
    assert not predicate({**event, "data": {**other, "customer": {"vip": True}}})


def test_the_cloudevents_example_is_what_we_render_and_the_sdk_reads() -> None:
    example = json.loads(options_snippets()["cloudevents-example"])
    rendered = rendering.envelope(
        "cloudevents",
        event_id=example["id"],
        event_type=example["type"],
        version=example["dataversion"],
        occurred_at=datetime.fromisoformat(example["time"].replace("Z", "+00:00")),
        data=example["data"],
        source=example["source"],
    )
    assert rendered == example
    namespace: dict[str, Any] = {}
    exec(options_snippets()["cloudevents-python"], namespace)  # noqa: S102
    headers = {"Content-Type": "application/cloudevents+json"}
    parsed = namespace["parse"](headers, json.dumps(rendered).encode())
    assert parsed == ("invoice.paid", 1, {"invoice_id": 42, "amount": 4200})
    assert datetime.fromisoformat(rendered["time"]).astimezone(UTC).year == 2026
