"""The console's side of pull delivery: the endpoint form knows `mode`, a polling
endpoint's page shows its feed (poll URL, consumer groups with lag, recent polls), the
poll key is shown once on the secrets page, and polls are read-only records."""

import re
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client

from deliveries import services
from deliveries.endpoints.principals import OPERATOR
from deliveries.models import Delivery, DeliveryStatus, Endpoint, PollRecord
from deliveries.polling import keys
from deliveries.polling import services as polling
from tests.deliveries.admin.helpers import endpoint_form
from tests.deliveries.helpers import available_rows

ADMIN = "/admin/deliveries"
KEY = re.compile(r"whpoll_[A-Za-z0-9_-]+")


def poll_endpoint(**fields: Any) -> Endpoint:
    options: dict[str, Any] = {"event_types": ["*"], "description": "laptop", **fields}
    return polling.endpoint_create_with_key(
        principal=OPERATOR, url="", mode="poll", **options
    ).endpoint


def act(client: Client, action: str, pks: list[Any], **extra: Any) -> Any:
    data = {"action": action, "_selected_action": [str(pk) for pk in pks], **extra}
    return client.post(f"{ADMIN}/endpoint/", data, follow=True)


@pytest.mark.django_db
def test_the_admin_adds_a_polling_endpoint_and_shows_its_key_once(superuser: Client) -> None:
    response = superuser.post(f"{ADMIN}/endpoint/add/", endpoint_form(mode="poll", url=""))
    assert response.status_code == 200, response.content.decode()[:3000]
    page = response.content.decode()
    created = Endpoint.objects.get()
    assert (created.mode, created.url) == ("poll", "")
    key = KEY.findall(page)[0]
    assert created.poll_key_hash == keys.key_hash(key)
    assert created.secrets.get().value in page
    assert f"/api/v1/poll/{created.pk}" in page
    assert "no-store" in response["Cache-Control"]
    assert key not in str(response.cookies.get("messages", ""))
    assert all(key not in entry.change_message for entry in LogEntry.objects.all())
    change = superuser.get(f"{ADMIN}/endpoint/{created.pk}/change/").content.decode()
    assert key not in change
    assert f"/api/v1/poll/{created.pk}" in change


@pytest.mark.django_db
def test_the_admin_forms_check_knows_the_mode(superuser: Client) -> None:
    polled_with_url = superuser.post(f"{ADMIN}/endpoint/add/", endpoint_form(mode="poll"))
    assert polled_with_url.status_code == 200
    assert "A polling endpoint has no URL" in polled_with_url.content.decode()
    pushed_without = superuser.post(f"{ADMIN}/endpoint/add/", endpoint_form(url=""))
    assert "Enter a URL." in pushed_without.content.decode()
    assert not Endpoint.objects.exists()
    # A form posted without a mode (an older page) adds a push endpoint, as before.
    older = endpoint_form()
    del older["mode"]
    assert superuser.post(f"{ADMIN}/endpoint/add/", older).status_code == 200
    assert Endpoint.objects.get().mode == "push"


@pytest.mark.django_db
def test_endpoint_check_takes_a_polling_endpoint_without_url() -> None:
    services.endpoint_check(url="", mode="poll", event_types=["*"])
    with pytest.raises(services.EndpointInvalid) as caught:
        services.endpoint_check(url="https://x.example.com/h", mode="poll", event_types=["*"])
    assert "url" in caught.value.errors
    with pytest.raises(services.EndpointInvalid) as caught:
        services.endpoint_check(url="", event_types=["*"])
    assert "url" in caught.value.errors
    polled = poll_endpoint()
    services.endpoint_check(endpoint=polled, description="desk")
    with pytest.raises(services.EndpointInvalid):
        services.endpoint_check(endpoint=polled, url="https://x.example.com/h")


@pytest.mark.django_db(transaction=True)
def test_a_polling_endpoints_page_shows_its_consumers_lag_and_polls(viewer: Client) -> None:
    endpoint = poll_endpoint()
    available_rows(endpoint, 4)
    page = polling.group_read(endpoint=endpoint, name="billing", limit=1)
    polling.group_commit(endpoint=endpoint, name="billing", iterator=page.iterator)
    polling.feed_read(endpoint=endpoint, limit=2)

    body = viewer.get(f"{ADMIN}/endpoint/{endpoint.pk}/change/").content.decode()
    consumers = re.search(r'<table id="poll-consumers">.*?</table>', body, re.S)
    assert consumers is not None
    assert "billing" in consumers.group(0)
    assert '<td class="lag">3</td>' in consumers.group(0)
    first = Delivery.objects.filter(endpoint=endpoint).order_by("id").first()
    assert first is not None
    assert f"/admin/deliveries/delivery/{first.pk}/change/" in consumers.group(0)
    polls = re.search(r'<table id="recent-polls">.*?</table>', body, re.S)
    assert polls is not None
    assert polls.group(0).count('class="poll"') == 2
    assert f"/api/v1/poll/{endpoint.pk}" in body
    assert 'name="url"' not in body

    # The records themselves: listed for viewers, never changed.
    records = viewer.get(f"{ADMIN}/pollrecord/?endpoint__id__exact={endpoint.pk}")
    assert records.status_code == 200
    assert records.content.decode().count("(iterator read)") == 1
    record = PollRecord.objects.filter(endpoint=endpoint).first()
    assert record is not None
    assert viewer.get(f"{ADMIN}/pollrecord/{record.pk}/change/").status_code == 200
    assert viewer.post(f"{ADMIN}/pollrecord/{record.pk}/delete/").status_code == 403
    assert viewer.get(f"{ADMIN}/pollrecord/add/").status_code == 403


@pytest.mark.django_db
def test_a_polling_endpoint_is_changed_without_a_url(superuser: Client) -> None:
    endpoint = poll_endpoint()
    form = endpoint_form(description="desk", event_types='["*"]')
    del form["url"], form["mode"]
    response = superuser.post(f"{ADMIN}/endpoint/{endpoint.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    endpoint.refresh_from_db()
    assert (endpoint.description, endpoint.url, endpoint.mode) == ("desk", "", "poll")


@pytest.mark.django_db
def test_rotating_poll_keys_shows_them_once_and_logs_no_key(
    operator: Client, viewer: Client
) -> None:
    polled = poll_endpoint()
    pushed, _ = services.endpoint_create(url="https://hooks.example.com/x", event_types=["*"])
    before = polled.poll_key_hash
    confirm = act(operator, "rotate_poll_key", [polled.pk, pushed.pk])
    assert "Issue new keys" in confirm.content.decode()
    assert not KEY.search(confirm.content.decode())
    assert Endpoint.objects.get(pk=polled.pk).poll_key_hash == before

    shown = act(operator, "rotate_poll_key", [polled.pk, pushed.pk], confirm="yes")
    found = KEY.findall(shown.content.decode())
    assert len(set(found)) == 2
    assert {keys.endpoint_of_key(key) for key in found} == {polled, pushed}
    assert "no-store" in shown["Cache-Control"]
    for entry in LogEntry.objects.all():
        assert not KEY.search(entry.change_message)
    page = operator.get(f"{ADMIN}/endpoint/{pushed.pk}/change/").content.decode()
    assert f"/api/v1/poll/{pushed.pk}" in page  # its catch-up feed
    assert not any(key in page for key in found)

    # From the endpoint's page: confirm, then the key once; viewers may not.
    one = f"{ADMIN}/endpoint/{polled.pk}/rotate-poll-key/"
    assert not KEY.search(operator.get(one).content.decode())
    again = operator.post(one)
    key = KEY.findall(again.content.decode())[0]
    assert keys.endpoint_of_key(key) == polled
    assert viewer.get(one).status_code == 403
    assert viewer.post(one).status_code == 403
    assert keys.endpoint_of_key(key) == polled
    viewing = act(viewer, "rotate_poll_key", [polled.pk], confirm="yes")
    assert not KEY.search(viewing.content.decode())


@pytest.mark.django_db
def test_a_test_event_goes_into_a_polling_endpointsavailable_rows(operator: Client) -> None:
    endpoint = poll_endpoint()
    act(operator, "send_test_event", [endpoint.pk])
    delivery = Delivery.objects.get(endpoint=endpoint)
    # Nothing to send it to: its consumer reads it (no owner claims this state).
    assert (delivery.event.type, delivery.status) == ("webhook.test", DeliveryStatus.AVAILABLE)
