"""Signature floods, through the `web` process as the Procfile starts it (gunicorn).

Forged ed25519 (`v1a`) candidates each cost a verification over the whole body, and
gunicorn joins repeated header lines into one value, so a request could carry thousands:
90 lines of 85 candidates over a 200 KB body took 2.81 s to refuse. Now more than
`MAX_SIGNATURES` is a 400 before any cryptography, in well under a second, however the
candidates are sent; and HEAD/GET answer the same for every slug.
"""

import http.client
import time
from urllib.parse import urlsplit

import pytest

from receivers import services
from receivers.models import InboxEvent
from receivers.schemes import MAX_SIGNATURES
from tests.faults.processes import procfile_web
from tests.helpers import database_url
from tests.receivers.helpers import ours_event
from webhooks_core.crypto import signing

pytestmark = [
    pytest.mark.faults,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(120),
]

#: "Well under a second": the refusal must not depend on the candidates' number.
FAST = 0.5


def forged(index: int) -> str:
    private, _ = signing.generate_key_pair()
    return signing.sign_v1a(private, f"msg_{index}", 1, b"x")


def post(
    base: str, slug: str, body: bytes, header_lines: list[tuple[str, str]]
) -> tuple[int, bytes, float]:
    """A POST with exactly these header lines (repeated names stay separate lines)."""
    url = urlsplit(base)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    try:
        connection.putrequest("POST", f"/receivers/{slug}/")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(len(body)))
        for name, value in header_lines:
            connection.putheader(name, value)
        started = time.perf_counter()
        connection.endheaders(body)
        response = connection.getresponse()
        content = response.read()
        return response.status, content, time.perf_counter() - started
    finally:
        connection.close()


def test_a_flood_of_forged_v1a_candidates_is_refused_at_once() -> None:
    private, public = signing.generate_key_pair()
    source, _ = services.source_create(
        slug="svix-keys", scheme="standard", secret=public, max_body_bytes=1024 * 1024
    )
    body = ours_event(data={"pad": "x" * 200_000})
    ts = int(time.time())
    base_headers = [("webhook-id", "msg_1"), ("webhook-timestamp", str(ts))]
    candidates = [forged(i) for i in range(85)]
    good = signing.sign_v1a(private, "msg_1", ts, body)

    with procfile_web({"DATABASE_URL": database_url()}) as base:
        # Warm the worker up (imports, connection) so the timings measure the request.
        post(base, source.slug, b"{}", base_headers)
        one_line = post(
            base, source.slug, body, [*base_headers, ("webhook-signature", " ".join(candidates))]
        )
        many_lines = post(
            base,
            source.slug,
            body,
            [*base_headers, *[("webhook-signature", " ".join(candidates))] * 90],
        )
        # One candidate per line: only the joined value shows how many there are.
        one_each = post(
            base,
            source.slug,
            body,
            [*base_headers, *[("webhook-signature", c) for c in candidates[: MAX_SIGNATURES + 1]]],
        )
        # Under the cap, the genuine signature among forged ones still verifies.
        accepted = post(
            base,
            source.slug,
            body,
            [
                *base_headers,
                *[("webhook-signature", c) for c in [*candidates[: MAX_SIGNATURES - 1], good]],
            ],
        )

    for status, content, seconds in (one_line, many_lines, one_each):
        assert status == 400, content
        assert b"too many signatures" in content
        assert seconds < FAST, seconds
    assert accepted[0] == 200, accepted[1]
    assert InboxEvent.objects.filter(source=source).count() == 1


def test_head_and_get_answer_the_same_for_every_slug() -> None:
    services.source_create(slug="exists", scheme="ours")

    def answers(base: str, method: str, slug: str) -> tuple[int, bytes, str]:
        url = urlsplit(base)
        connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
        try:
            connection.request(method, f"/receivers/{slug}/")
            response = connection.getresponse()
            return response.status, response.read(), response.getheader("Allow") or ""
        finally:
            connection.close()

    with procfile_web({"DATABASE_URL": database_url()}) as base:
        for method in ("HEAD", "GET"):
            known = answers(base, method, "exists")
            unknown = answers(base, method, "no-such-source")
            assert known == unknown, method
    assert known[0] == 405  # GET
