"""Reconciliation requests carry a bearer token, so they get the SSRF
guard at connect time and follow `next` links on the base URL's origin only; each ends
within its total deadline, as a delivery's does. Real HTTP servers on 127.0.0.1 (two
ports: two origins), and the scripted raw peer for an answer that trickles."""

import time

import pytest
import requests
from pytest_django.fixtures import Settings as SettingsWrapper

from receivers import reconciliation
from receivers.reconciliation import ProviderURLRefused, provider_pages
from tests import raw_peer
from tests.receiver import PagesServer


def test_next_links_are_followed_on_the_same_origin_only(
    provider: PagesServer, elsewhere: PagesServer
) -> None:
    provider.pages = [
        {"results": [1], "next": "/api/v1/events?cursor=2"},  # relative: same origin
        {"results": [2], "next": f"{provider.url}/api/v1/events?cursor=3"},
        {"results": [3], "next": f"{elsewhere.url}/steal"},  # another port: another origin
    ]
    pages = provider_pages(
        base_url=provider.url, token="tok_secret", first_url=f"{provider.url}/api/v1/events"
    )
    got = [next(pages)["results"], next(pages)["results"], next(pages)["results"]]
    assert got == [[1], [2], [3]]
    with pytest.raises(ProviderURLRefused, match="another origin"):
        next(pages)
    assert [auth for _, auth in provider.seen] == ["Bearer tok_secret"] * 3
    assert elsewhere.seen == []  # the token never left the provider's origin


@pytest.mark.parametrize(
    "link",
    ["http://127.0.0.1:1\\@example.com/x", "https://{host}/x", "//evil.example/x"],
)
def test_ambiguous_or_foreign_next_links_are_not_followed(provider: PagesServer, link: str) -> None:
    host = provider.url.removeprefix("http://")
    provider.pages = [{"results": [], "next": link.format(host=host)}]
    pages = provider_pages(base_url=provider.url, token="t", first_url=provider.url + "/")
    next(pages)
    with pytest.raises(ProviderURLRefused):
        next(pages)
    assert len(provider.seen) == 1


def test_connect_time_guard_refuses_an_internal_provider_url(
    provider: PagesServer, settings: SettingsWrapper
) -> None:
    # A row written past the services (or a name that resolves inward later): the request
    # itself is refused before any byte is sent.
    settings.WEBHOOKS_ALLOWED_NETWORKS = []
    pages = provider_pages(base_url=provider.url, token="t", first_url=provider.url + "/")
    with pytest.raises(requests.ConnectionError, match="SSRF guard"):
        next(pages)
    assert provider.seen == []


# An answer that keeps its connection, and each framing that ends with it.
TRICKLING_HEADS = {
    "keep-alive": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100000\r\n\r\n",
    **raw_peer.ENDS_WITH_CONNECTION,
}


@pytest.mark.parametrize("framing", list(TRICKLING_HEADS))
def test_a_provider_trickling_its_answer_is_cut_at_the_deadline(
    framing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A byte every 0.2 s: never a read timeout, never an answer.
    monkeypatch.setattr(reconciliation, "TIMEOUT", (0.5, 1.0))
    with raw_peer.trickling(TRICKLING_HEADS[framing]) as peer:
        pages = provider_pages(base_url=peer.url, token="t", first_url=peer.url)
        started = time.monotonic()
        with pytest.raises(requests.Timeout, match=r"longer than 1\.5 s"):
            next(pages)
        took = time.monotonic() - started
    assert len(peer.requests) == 1
    assert took < raw_peer.TRICKLE_SECONDS / 2, f"took {took:.1f} s"
