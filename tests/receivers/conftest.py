from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from receivers.services import dispatch
from tests.receiver import PagesServer


@pytest.fixture
def quick_retries(settings: SettingsWrapper) -> None:
    """Backoff in tens of milliseconds and three attempts, so retries happen in a test."""
    settings.RECEIVERS_BACKOFF_BASE_SECONDS = 0.05
    settings.RECEIVERS_BACKOFF_MAX_SECONDS = 0.2
    settings.RECEIVERS_MAX_ATTEMPTS = 3
    settings.RECEIVERS_REDISPATCH_GRACE_SECONDS = 0.0
    settings.RECEIVERS_LEASE_SECONDS = 1.0


def post(client: Client, slug: str, body: bytes, headers: dict[str, str], **kw: Any) -> Any:
    return client.post(
        f"/receivers/{slug}/",
        data=body,
        content_type=kw.pop("content_type", "application/json"),
        headers=headers,
        **kw,
    )


@pytest.fixture(autouse=True)
def _previous_messages_sent() -> None:
    """The view's processing messages go out from a thread; the ones of the test before
    are sent before this test's worker fixture empties the broker, not into this test."""
    dispatch.flush_pending()


# A provider's API pages, and a server that is not the provider (reconciliation).
@pytest.fixture
def provider() -> Iterator[PagesServer]:
    server = PagesServer()
    yield server
    server.close()


@pytest.fixture
def elsewhere() -> Iterator[PagesServer]:
    server = PagesServer()
    yield server
    server.close()
