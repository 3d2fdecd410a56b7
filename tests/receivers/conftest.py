from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from receivers import services
from receivers.models import Source
from receivers.services import dispatch
from webhooks_core.crypto.signing import generate_secret

MakeSource = Callable[..., tuple[Source, str]]


@pytest.fixture
def make_source(db: None) -> MakeSource:
    counter = iter(range(1, 10_000))

    def make(scheme: str = "ours", secret: str | None = None, **fields: Any) -> tuple[Source, str]:
        slug = fields.pop("slug", f"{scheme}-{next(counter)}")
        if secret is None:
            secret = generate_secret()
        return services.source_create(slug=slug, scheme=scheme, secret=secret, **fields)

    return make


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
