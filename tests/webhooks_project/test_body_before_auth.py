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
