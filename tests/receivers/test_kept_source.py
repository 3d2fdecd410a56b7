"""The receiving view takes the source its request's body buffering looked up a moment ago
(receivers/kept_source.py): one look-up per request, not two; a look-up made too long
ago, or for another slug, is made again."""

import io
import time
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from receivers import kept_source
from receivers.models import Source
from tests.fixtures import MakeSource
from tests.receivers.helpers import ours_event, sign_ours


def through_the_web_process(slug: str, body: bytes, headers: dict[str, str]) -> tuple[str, int]:
    """POST through the WSGI stack (body buffering included): the status line and the
    statements that read sources."""
    from webhooks_project.wsgi import application

    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": f"/receivers/{slug}/",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": io.StringIO(),
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        **{"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()},
    }
    status: list[str] = []
    with CaptureQueriesContext(connection) as queries:
        b"".join(application(environ, lambda line, headers, *_: status.append(line)))
    table = f'"{Source._meta.db_table}"'
    reads = [q for q in queries.captured_queries if f"FROM {table}" in q["sql"]]
    return status[0], len(reads)


@pytest.mark.django_db(transaction=True)
def test_one_look_up_of_the_source_per_request(make_source: MakeSource) -> None:
    source, secret = make_source()
    body = ours_event()

    status, reads = through_the_web_process(source.slug, body, sign_ours([secret], body))

    assert status.startswith("200"), status
    assert reads == 1


def post(client: Client, slug: str, secret: str, kept: tuple[str, float, Any]) -> int:
    body = ours_event()
    signed = sign_ours([secret], body)
    extra: dict[str, Any] = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in signed.items()}
    extra[kept_source.ENVIRON_KEY] = kept
    answer = client.post(f"/receivers/{slug}/", body, content_type="application/json", **extra)
    return int(answer.status_code)


def test_a_look_up_made_long_before_or_for_another_slug_is_made_again(
    make_source: MakeSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, secret = make_source()
    client = Client()
    # Made before the source was disabled, but longer ago than the window: looked up again.
    found = kept_source.kept_or_looked_up({}, source.slug)
    Source.objects.filter(pk=source.pk).update(enabled=False)
    assert post(client, source.slug, secret, (source.slug, time.monotonic() - 5, found)) == 404
    # For another slug: not taken.
    assert post(client, source.slug, secret, ("other", time.monotonic(), found)) == 404
    # A fresh one for this slug is taken as it is, without a look-up (made a moment ago by
    # the body buffering; here: before the source was disabled).
    monkeypatch.setattr(kept_source, "REUSE_SECONDS", 300.0)
    assert post(client, source.slug, secret, (source.slug, time.monotonic(), found)) == 200
