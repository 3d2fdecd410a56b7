"""A source's stored API token never follows a change
of `api_base_url` to another origin (scheme, host or port), in the service, so the admin
and every other caller get the rule; the admin says so."""

import pytest
from django.contrib.auth.models import User
from django.test import Client

from receivers import services
from receivers.models import Source
from receivers.reconciliation import provider_pages
from tests.receiver import PagesServer

pytestmark = pytest.mark.django_db


def next_reconciliation(source: Source) -> None:
    source.refresh_from_db()
    pages = provider_pages(
        base_url=source.api_base_url,
        token=source.api_token,
        first_url=source.api_base_url + "/events",
    )
    next(pages)


def test_a_new_origin_gets_no_token(provider: PagesServer, elsewhere: PagesServer) -> None:
    source, _ = services.source_create(
        slug="shop", scheme="ours", api_base_url=provider.url, api_token="tok_secret"
    )
    # Same origin, another path: the token stays.
    same = services.source_update(source=source, api_base_url=provider.url + "/v2")
    assert same.notices == ()
    assert same.api_token == "tok_secret"

    # Another port is another origin: the token is dropped, and the caller told.
    moved = services.source_update(source=source, api_base_url=elsewhere.url)
    assert moved.api_token == ""
    assert len(moved.notices) == 1
    assert "api_token" in moved.notices[0]
    next_reconciliation(source)
    assert [auth for _, auth in elsewhere.seen] == [""]


def test_a_token_given_in_the_same_change_is_kept(elsewhere: PagesServer) -> None:
    source, _ = services.source_create(
        slug="shop", scheme="ours", api_base_url="https://1.1.1.1/api", api_token="tok_old"
    )
    moved = services.source_update(
        source=source, api_base_url=elsewhere.url, api_token="tok_for_elsewhere"
    )
    assert moved.notices == ()
    next_reconciliation(source)
    assert [auth for _, auth in elsewhere.seen] == ["Bearer tok_for_elsewhere"]


@pytest.mark.parametrize(
    "url",
    [
        "http://1.1.1.1/api",  # scheme
        "https://8.8.8.8/api",  # host
        "https://1.1.1.1:8443/api",  # port
        "",  # no URL: a later one must not inherit the token either
    ],
)
def test_every_change_of_origin_drops_the_token(url: str) -> None:
    source, _ = services.source_create(
        slug="shop", scheme="ours", api_base_url="https://1.1.1.1/api", api_token="tok"
    )
    assert services.source_update(source=source, api_base_url=url).api_token == ""
    assert (
        services.source_update(source=source, api_base_url="https://1.1.1.1:443/other").notices
        == ()
    )  # nothing left to drop


def test_the_admin_says_the_token_was_dropped(client: Client) -> None:
    client.force_login(User.objects.create_superuser("admin", "a@example.com", "pw"))
    source, _ = services.source_create(
        slug="shop", scheme="ours", api_base_url="https://1.1.1.1/api", api_token="tok"
    )
    form = {
        "slug": "shop",
        "scheme": "ours",
        "description": "",
        "enabled": "on",
        "tolerance_seconds": "300",
        "max_body_bytes": str(256 * 1024),
        "expected_account": "",
        "expected_mode": "",
        "api_base_url": "https://8.8.8.8/api",
        "api_token": "",
        "secrets-TOTAL_FORMS": "0",
        "secrets-INITIAL_FORMS": "0",
        "secrets-MIN_NUM_FORMS": "0",
        "secrets-MAX_NUM_FORMS": "1000",
    }
    response = client.post(f"/admin/receivers/source/{source.pk}/change/", form, follow=True)
    assert response.status_code == 200
    assert "The API token was removed" in response.content.decode()
    source.refresh_from_db()
    assert source.api_base_url == "https://8.8.8.8/api"
    assert source.encrypted_api_token == ""
