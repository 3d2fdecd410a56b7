"""The suite's shared fixtures and factories (registered from tests/conftest.py).

Every test takes these from here rather than defining its own: the API clients (a token,
the operator's client, none), the staff clients of the admin, endpoint and receiver source
factories, the local HTTP peers (a receiver, an OAuth2 token server, browsers) and a free
port. tests/test_layout.py fails on a test module that defines a fixture of the same name.
"""

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from deliveries import services
from deliveries.models import (
    ApiToken,
    Endpoint,
)
from receivers import services as receiver_services
from receivers.models import Source
from tests.browser import CHROMIUM, CHROMIUM_FLAGS, SCREENSHOTS, require_chromium
from tests.deliveries.admin.helpers import staff_in
from tests.deliveries.auth_peers import TokenServer
from tests.receiver import Receiver
from webhooks_core.crypto.signing import generate_secret

# --- factories ----------------------------------------------------------------------------


def api_client(plain: str) -> APIClient:
    """A client of the HTTP API that sends the token `plain`."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    return client


def new_endpoint(url: str = "https://receiver.example.com/hook", **fields: Any) -> Endpoint:
    """An endpoint of every event type at `url`, with the services' defaults; `fields` set
    anything else."""
    created, _ = services.endpoint_create(url=url, **{"event_types": ["*"], **fields})
    return created


def operator_api() -> APIClient:
    """A client of the HTTP API with a new operator's token (no tenant scope)."""
    _, plain = ApiToken.issue("tests")
    return api_client(plain)


def logged_in(user: User) -> Client:
    """A Django test client with `user` logged in (the admin, the dashboard)."""
    client = Client()
    client.force_login(user)
    return client


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


MakeSource = Callable[..., tuple[Source, str]]


# --- the HTTP API -------------------------------------------------------------------------


@pytest.fixture
def token(db: None) -> str:
    """An operator's token: no tenant scope."""
    _, plain = ApiToken.issue("tests")
    return plain


@pytest.fixture
def anon() -> APIClient:
    return APIClient()


@pytest.fixture
def api(token: str) -> APIClient:
    """The HTTP API as an operator (a token with no tenant scope)."""
    return api_client(token)


# --- staff ----------------------------------------------------------------------------------


@pytest.fixture
def staff(client: Client) -> Client:
    """pytest-django's `client`, logged in as a superuser named admin."""
    client.force_login(User.objects.create_superuser("admin", "a@example.com", "pw"))
    return client


@pytest.fixture
def superuser() -> Client:
    return logged_in(User.objects.create_superuser("root", "root@example.com", "pw"))


@pytest.fixture
def viewer() -> Client:
    """A member of the console's view-only group."""
    return logged_in(staff_in("viewers"))


@pytest.fixture
def operator() -> Client:
    """A member of the console's operators group."""
    return logged_in(staff_in("operators"))


# --- endpoints and sources --------------------------------------------------------------------


@pytest.fixture
def make_source(db: None) -> MakeSource:
    counter = iter(range(1, 10_000))

    def make(scheme: str = "ours", secret: str | None = None, **fields: Any) -> tuple[Source, str]:
        slug = fields.pop("slug", f"{scheme}-{next(counter)}")
        if secret is None:
            secret = generate_secret()
        return receiver_services.source_create(slug=slug, scheme=scheme, secret=secret, **fields)

    return make


# --- HTTP peers -------------------------------------------------------------------------------


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver.running() as server:
        yield server


@pytest.fixture
def token_server() -> Iterator[TokenServer]:
    with TokenServer().running() as server:
        yield server


FAST_POLICY: dict[str, Any] = {
    "backoff_base_seconds": 0.05,
    "backoff_max_seconds": 0.2,
    "connect_timeout_seconds": 1.0,
    "read_timeout_seconds": 2.0,
}


def make_endpoint(receiver: Receiver, url: str = "", **fields: Any) -> tuple[Endpoint, str]:
    """An endpoint of every event type at the receiver (or `url`) that retries within a
    test's patience (FAST_POLICY), and its signing secret; `fields` set anything else."""
    options = {**FAST_POLICY, "event_types": ["*"], **fields}
    return services.endpoint_create(url=url or receiver.url, **options)


# --- browsers (the browser tests' modules call tests.browser.require_chromium first) ----------


@pytest.fixture
def page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A page of Chromium with a profile of its own, 1900 pixels wide (the admin's tests)."""
    sync_api = require_chromium()
    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls
    # are synchronous all the same.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1900, "height": 900},
        )
        context.set_default_timeout(20_000)
        try:
            yield context.new_page()
        finally:
            context.close()


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Chromium, for tests that open several contexts (tests.deliveries.portal.browser)."""
    sync_api = require_chromium()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield launched
        finally:
            launched.close()


# The headers that name and sign every message, whatever carries it: a request, a broker's
# message, a polled message (`wire.message_headers`).
MESSAGE_HEADERS = {
    "Content-Type",
    "X-Webhook-Id",
    "X-Webhook-Event",
    "X-Webhook-Timestamp",
    "X-Webhook-Signature",
    "X-Webhook-Replay",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
}
