"""`Transfer-Encoding: chunked` receiver requests through the real `web` process.

Django's test client always sends a Content-Length and its development server does not
decode chunked bodies, so only the Procfile's gunicorn shows what a provider that streams
its body gets: before the fix a valid signature was checked against an empty body (401).
"""

from collections.abc import Iterator

import pytest
import requests

from receivers import services
from receivers.models import InboxEvent
from tests.faults.processes import procfile_web
from tests.helpers import database_url
from tests.receivers.helpers import ours_event, sign_ours

pytestmark = [
    pytest.mark.faults,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(120),
]


def in_chunks(body: bytes, size: int = 100) -> Iterator[bytes]:
    # A generator makes requests send Transfer-Encoding: chunked, without Content-Length.
    for start in range(0, len(body), size):
        yield body[start : start + size]


def test_signed_chunked_bodies_are_accepted_up_to_the_source_limit() -> None:
    source, secret = services.source_create(slug="chunked", scheme="ours", max_body_bytes=4096)
    fits = ours_event(data={"pad": "x" * 3000})
    too_big = ours_event(data={"pad": "x" * 5000})

    with procfile_web({"DATABASE_URL": database_url()}) as base:
        url = f"{base}/receivers/{source.slug}/"

        def send(body: bytes) -> requests.Response:
            headers = {**sign_ours([secret], body), "Content-Type": "application/json"}
            response = requests.post(url, data=in_chunks(body), headers=headers, timeout=10)
            assert response.request.headers.get("Transfer-Encoding") == "chunked"
            assert "Content-Length" not in response.request.headers
            return response

        accepted = send(fits)
        refused = send(too_big)

    assert accepted.status_code == 200, accepted.content
    assert accepted.json() == {"status": "accepted"}
    assert refused.status_code == 413, refused.content
    row = InboxEvent.objects.get(source=source)
    assert bytes(row.raw_body or b"") == fits
