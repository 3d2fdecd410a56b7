"""Bodies are read only for callers who are known (an unknown one must not make us buffer
megabytes): the web process's body buffering (webhooks_project/bodies.py) reads an API
request's body only after its token checked out, and a receiver's up to its source's own
limit (nothing for an unknown slug)."""

import io
from typing import Any

import pytest

from deliveries.models import ApiToken
from receivers.models import Source
from webhooks_project.bodies import BufferedBody


class Untouchable(io.RawIOBase):
    """A request body that fails the test if anyone reads it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.read_bytes = 0

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.read_bytes if n < 0 else min(n, self.size - self.read_bytes)
        self.read_bytes += n
        return b"x" * n


def call(path: str, size: int, **headers: str) -> tuple[Untouchable, dict[str, Any]]:
    body = Untouchable(size)
    seen: dict[str, Any] = {}

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.update(environ)
        return [b""]

    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "CONTENT_LENGTH": str(size),
        "wsgi.input": body,
        **headers,
    }
    BufferedBody(app)(environ, lambda *a: None)
    return body, seen


@pytest.mark.django_db
def test_an_api_body_is_read_only_after_the_token_is_checked() -> None:
    unread, _ = call("/api/v1/events", 5_000_000)
    assert unread.read_bytes == 0
    bad, _ = call("/api/v1/events", 5_000_000, HTTP_AUTHORIZATION="Bearer whk_nope")
    assert bad.read_bytes == 0
    _, plain = ApiToken.issue("t")
    good, _ = call("/api/v1/events", 1000, HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert good.read_bytes == 1000


@pytest.mark.django_db
def test_a_receiver_body_is_read_up_to_its_sources_limit() -> None:
    unknown, _ = call("/receivers/nope/", 100_000)
    assert unknown.read_bytes == 0
    Source.objects.create(slug="gh", scheme="github", max_body_bytes=2048)
    over, _ = call("/receivers/gh/", 100_000)
    assert over.read_bytes == 0  # the view refuses it by its declared size
    within, _ = call("/receivers/gh/", 2000)
    assert within.read_bytes == 2000


@pytest.mark.django_db(transaction=True)
def test_a_threads_own_persistent_connection_outlives_the_look_up() -> None:
    # A worker thread's connection is its own: closing it before the body is read would
    # only cost a new PostgreSQL backend on every request.
    from django.db import connection

    _, plain = ApiToken.issue("t")
    connection.ensure_connection()
    before = connection.connection
    call("/api/v1/events", 1000, HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert connection.connection is before


def test_pooled_and_greenlet_connections_are_given_back_before_the_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from webhooks_project import bodies

    monkeypatch.setattr(bodies, "is_module_patched", lambda name: False)
    own = SimpleNamespace(in_atomic_block=False, pool=None)
    pooled = SimpleNamespace(in_atomic_block=False, pool=object())
    in_transaction = SimpleNamespace(in_atomic_block=True, pool=object())
    assert not bodies._shared_while_the_body_comes(own)
    assert bodies._shared_while_the_body_comes(pooled)
    assert not bodies._shared_while_the_body_comes(in_transaction)
    monkeypatch.setattr(bodies, "is_module_patched", lambda name: name == "threading")
    assert bodies._shared_while_the_body_comes(own)


def post_event(token: str, **extra: Any) -> tuple[str, list[str], dict[str, Any]]:
    """POST an event through the web process's WSGI stack (body buffering included);
    returns the status line, the SQL statements that read API tokens and the environ."""
    import json

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from webhooks_project.wsgi import application

    body = json.dumps({"type": "order.created", "data": {}}).encode()
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/v1/events",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": io.StringIO(),
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_AUTHORIZATION": f"Bearer {token}",
        **extra,
    }
    status: list[str] = []
    with CaptureQueriesContext(connection) as queries:
        b"".join(application(environ, lambda line, headers, *_: status.append(line)))
    token_reads = [
        q["sql"] for q in queries.captured_queries if 'FROM "webhooks_core_apitoken"' in q["sql"]
    ]
    return status[0], token_reads, environ


@pytest.mark.django_db(transaction=True)
def test_the_view_takes_the_token_as_checked_before_the_body() -> None:
    from webhooks_core.api.authentication import AUTHENTICATED_ENVIRON_KEY

    _, plain = ApiToken.issue("t")
    status, token_reads, environ = post_event(plain)
    assert status.startswith("20"), status
    assert len(token_reads) == 1
    assert environ[AUTHENTICATED_ENVIRON_KEY][0] == f"Bearer {plain}", "checked before the body"


@pytest.mark.django_db
def test_a_check_made_long_before_or_for_another_header_is_made_again(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from django.utils import timezone

    from webhooks_core.api import authentication

    key = authentication.AUTHENTICATED_ENVIRON_KEY
    token, plain = ApiToken.issue("t")
    _, other = ApiToken.issue("other")
    event = {"type": "order.created", "data": {}}

    def post(bearer: str, kept: tuple[str, float, Any]) -> int:
        answer = client.post(
            "/api/v1/events",
            event,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {bearer}",
            **{key: kept},
        )
        return int(answer.status_code)

    # A body that took longer than the reuse window: the token, revoked meanwhile, is
    # checked again and refused.
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    stale = (f"Bearer {plain}", time.monotonic() - 5, (None, token))
    assert post(plain, stale) == 401
    # A kept result is taken only for the header it was made for.
    foreign = (f"Bearer {plain}", time.monotonic(), (None, token))
    assert post(other, foreign) == 202
    # A fresh one for the same header is taken as it is, without a look-up: the WSGI
    # layer made it a moment ago (here: before the revocation).
    principal = authentication.TokenPrincipal(token_id=token.pk, name=token.name)
    # A window no loaded machine overruns between here and the view.
    monkeypatch.setattr(authentication, "AUTHENTICATED_REUSE_SECONDS", 300.0)
    fresh = (f"Bearer {plain}", time.monotonic(), (principal, token))
    assert post(plain, fresh) == 202
