"""The portal's pages of polling endpoints and catch-up keys: created, shown and rotated
for the session's tenant only, the key shown once, on its own page."""

import logging
import re
from typing import Any

import pytest

from deliveries import services
from deliveries.endpoints.principals import Principal
from deliveries.models import Delivery, Endpoint
from deliveries.polling import keys
from deliveries.polling import services as polling
from tests.deliveries.helpers import available_rows

from .helpers import portal_client

pytestmark = pytest.mark.django_db(transaction=True)

KEY = re.compile(r"whpoll_[A-Za-z0-9_-]+")


def text(response: Any) -> str:
    return str(response.content.decode())


def poll_endpoint_of(tenant: str, description: str = "laptop") -> Endpoint:
    created = polling.endpoint_create_with_key(
        principal=Principal(tenant=tenant),
        url="",
        mode="poll",
        event_types=["*"],
        description=description,
    )
    return created.endpoint


def test_a_tenant_adds_a_polling_endpoint_and_sees_its_key_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = portal_client("acme")
    caplog.set_level(logging.DEBUG)
    form = text(client.get("/portal/endpoints/new"))
    assert 'name="mode" value="poll"' in form

    answer = client.post(
        "/portal/endpoints/new",
        {"mode": "poll", "url": "", "description": "laptop", "event_types": ["*"]},
    )
    assert answer.status_code == 200, text(answer)
    shown = KEY.findall(text(answer))
    assert len(set(shown)) == 1
    key = shown[0]
    endpoint = Endpoint.objects.get(tenant="acme")
    assert (endpoint.mode, endpoint.url) == ("poll", "")
    assert endpoint.poll_key_hash == keys.key_hash(key)
    assert endpoint.secrets.get().value in text(answer)
    assert f"/api/v1/poll/{endpoint.pk}" in text(answer)
    assert answer["Cache-Control"].startswith("max-age=0") or "no-cache" in answer["Cache-Control"]

    # Nowhere else: not on the endpoint's page, the list, a log line, a cookie.
    page = text(client.get(f"/portal/endpoints/{endpoint.pk}/"))
    assert key not in page
    assert f"http://testserver/api/v1/poll/{endpoint.pk}" in page
    assert "Polling endpoint" in text(client.get("/portal/"))
    assert key not in caplog.text
    assert all(key not in morsel.value for morsel in client.cookies.values())


def test_a_push_endpoint_still_needs_its_url_and_a_polling_one_takes_none() -> None:
    client = portal_client("acme")
    push = client.post("/portal/endpoints/new", {"mode": "push", "event_types": ["*"]})
    assert push.status_code == 200
    assert "Enter a URL." in text(push)
    poll = client.post(
        "/portal/endpoints/new",
        {"mode": "poll", "url": "https://hooks.example.com/x", "event_types": ["*"]},
    )
    assert "A polling endpoint has no URL" in text(poll)
    assert not Endpoint.objects.exists()


def test_a_polling_endpoints_page_shows_its_consumers_lag_and_polls() -> None:
    endpoint = poll_endpoint_of("acme")
    available_rows(endpoint, 5)
    page = polling.group_read(endpoint=endpoint, name="billing", limit=2)
    polling.group_commit(endpoint=endpoint, name="billing", iterator=page.iterator)
    polling.group_read(endpoint=endpoint, name="billing", limit=1)  # leased, not committed
    polling.feed_read(endpoint=endpoint, limit=3)

    body = text(portal_client("acme").get(f"/portal/endpoints/{endpoint.pk}/"))
    consumers = re.search(r'<table id="consumers">.*?</table>', body, re.S)
    assert consumers is not None
    row = consumers.group(0)
    assert "billing" in row
    assert "3 messages" in row  # lag: five, two committed
    assert "1 message<" in row  # leased
    committed = Delivery.objects.filter(endpoint=endpoint).order_by("id")[1]
    assert f"/portal/deliveries/{committed.pk}/" in row
    polls = re.search(r'<table id="polls">.*?</table>', body, re.S)
    assert polls is not None
    assert polls.group(0).count('class="poll"') == 3
    assert "an iterator read" in polls.group(0)
    assert "Send a test event" not in body


def test_another_tenants_polling_endpoint_is_404() -> None:
    theirs = poll_endpoint_of("globex", description="globex laptop")
    before = Endpoint.objects.get(pk=theirs.pk).poll_key_hash
    client = portal_client("acme")
    for path in ("", "edit", "poll-key"):
        assert client.get(f"/portal/endpoints/{theirs.pk}/{path}").status_code == 404, path
    response = client.post(f"/portal/endpoints/{theirs.pk}/poll-key")
    assert response.status_code == 404
    assert not KEY.search(text(response))
    assert Endpoint.objects.get(pk=theirs.pk).poll_key_hash == before
    assert "globex" not in text(client.get("/portal/"))


def test_rotating_the_poll_key_shows_the_new_one_once_and_the_old_one_stops() -> None:
    endpoint = poll_endpoint_of("acme")
    before = endpoint.poll_key_hash
    client = portal_client("acme")
    confirm = client.get(f"/portal/endpoints/{endpoint.pk}/poll-key")
    assert confirm.status_code == 200
    assert "Rotate the poll key?" in text(confirm)
    assert not KEY.search(text(confirm))

    rotated = client.post(f"/portal/endpoints/{endpoint.pk}/poll-key")
    assert rotated.status_code == 200
    key = KEY.findall(text(rotated))[0]
    endpoint.refresh_from_db()
    assert endpoint.poll_key_hash == keys.key_hash(key) != before
    assert keys.endpoint_of_key(key) == endpoint
    assert "no-store" in rotated["Cache-Control"] or "no-cache" in rotated["Cache-Control"]
    assert key not in text(client.get(f"/portal/endpoints/{endpoint.pk}/"))


def test_a_push_endpoint_gets_a_catch_up_key_shown_once() -> None:
    pushed, _ = services.endpoint_create(
        url="https://hooks.example.com/x", event_types=["*"], tenant="acme"
    )
    client = portal_client("acme")
    page = text(client.get(f"/portal/endpoints/{pushed.pk}/"))
    assert "Get a catch-up key" in page
    assert "Catch-up feed" not in page
    issued = client.post(f"/portal/endpoints/{pushed.pk}/poll-key")
    key = KEY.findall(text(issued))[0]
    assert "Your new catch-up key" in text(issued)
    pushed.refresh_from_db()
    assert pushed.poll_key_hash == keys.key_hash(key)
    after = text(client.get(f"/portal/endpoints/{pushed.pk}/"))
    assert "Catch-up feed" in after
    assert "Replace the catch-up key" in after
    assert key not in after


def test_a_polling_endpoints_form_has_no_url_and_saves_its_filters() -> None:
    endpoint = poll_endpoint_of("acme")
    client = portal_client("acme")
    form = text(client.get(f"/portal/endpoints/{endpoint.pk}/edit"))
    assert 'name="url"' not in form
    assert 'name="mode"' not in form
    answer = client.post(
        f"/portal/endpoints/{endpoint.pk}/edit",
        {"description": "desk", "event_types": ["invoice.paid"]},
    )
    assert answer.status_code == 302, text(answer)
    endpoint.refresh_from_db()
    assert (endpoint.description, endpoint.event_types, endpoint.url) == (
        "desk",
        ["invoice.paid"],
        "",
    )
