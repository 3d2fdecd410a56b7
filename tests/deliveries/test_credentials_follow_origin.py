"""Credentials (sending side) never follow an endpoint to a new origin.

Changing an endpoint's `url` to another origin (scheme, host or port) drops its stored
secret headers unless the same request gives them again, and the answer says so; a
masked value is never unmasked by any write. The rules are in `endpoint_update`, so the
API, the admin and the portal all get them.
"""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from deliveries import services
from deliveries.endpoints.headers import MASK
from deliveries.models import Endpoint
from tests.deliveries.admin.helpers import endpoint_form
from tests.fixtures import FAST_POLICY
from tests.receiver import Receiver

API = "/api/v1"


def patch(api: APIClient, endpoint: Endpoint, payload: Any) -> Any:
    return api.patch(
        f"{API}/endpoints/{endpoint.pk}", data=json.dumps(payload), content_type="application/json"
    )


def make(url: str = "https://1.1.1.1/hook", **fields: Any) -> Endpoint:
    endpoint, _ = services.endpoint_create(
        url=url,
        event_types=["*"],
        custom_headers={"X-Api-Key": "k-123", "X-Partner": "p-456", "X-Tenant": "acme"},
        secret_headers=["X-Partner"],
        **fields,
    )
    return endpoint


@pytest.mark.django_db(transaction=True)
def test_the_new_host_never_gets_the_old_hosts_credentials(
    celery_worker: object, receiver: Receiver, api: APIClient
) -> None:
    # Two origins on one test server: 127.0.0.1 and localhost are different hosts.
    endpoint = make(url=receiver.url + "/old", **FAST_POLICY)
    moved_url = receiver.url.replace("127.0.0.1", "localhost") + "/new"
    response = patch(api, endpoint, {"url": moved_url})
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["custom_headers"] == {"X-Tenant": "acme"}
    assert answer["secret_headers"] == []
    assert "X-Api-Key" in answer["notices"][0]
    assert "X-Partner" in answer["notices"][0]
    assert "k-123" not in response.content.decode()

    services.emit("invoice.paid", {"invoice": "in_1"})
    (request,) = receiver.wait_for(1)
    assert request.path.endswith("/new")
    names = {name.lower() for name in request.headers}
    assert "x-api-key" not in names
    assert "x-partner" not in names
    assert request.headers.get("X-Tenant") == "acme"


@pytest.mark.django_db
def test_same_origin_keeps_them_and_a_new_origin_keeps_what_the_request_gives(
    api: APIClient,
) -> None:
    endpoint = make()
    same = patch(api, endpoint, {"url": "https://1.1.1.1:443/other-path"})
    assert same.status_code == 200, same.content
    assert same.json()["notices"] == []
    assert same.json()["secret_headers"] == ["X-Api-Key", "X-Partner"]

    given = patch(
        api,
        endpoint,
        {
            "url": "https://8.8.8.8/hook",
            "custom_headers": {"X-Api-Key": "k-new", "X-Tenant": "acme"},
        },
    )
    assert given.status_code == 200, given.content
    assert given.json()["notices"] == []
    endpoint.refresh_from_db()
    assert endpoint.custom_headers_plain() == {"X-Api-Key": "k-new", "X-Tenant": "acme"}


@pytest.mark.parametrize(
    "url",
    ["http://1.1.1.1/hook", "https://8.8.8.8/hook", "https://1.1.1.1:8443/hook"],
)
@pytest.mark.django_db
def test_scheme_host_and_port_are_each_an_origin(api: APIClient, url: str) -> None:
    endpoint = make()
    response = patch(api, endpoint, {"url": url})
    assert response.status_code == 200, response.content
    endpoint.refresh_from_db()
    assert endpoint.secret_custom_headers == {}
    assert endpoint.custom_headers == {"X-Tenant": "acme"}


@pytest.mark.django_db
def test_a_masked_value_sent_back_across_an_origin_change_is_refused(api: APIClient) -> None:
    endpoint = make()
    response = patch(
        api,
        endpoint,
        {"url": "https://8.8.8.8/hook", "custom_headers": {"X-Api-Key": MASK, "X-Tenant": "a"}},
    )
    assert response.status_code == 400, response.content
    assert "another origin" in " ".join(response.json()["custom_headers"])
    endpoint.refresh_from_db()
    assert endpoint.url == "https://1.1.1.1/hook"
    assert endpoint.custom_headers_plain()["X-Api-Key"] == "k-123"


@pytest.mark.django_db
def test_unmarking_a_secret_header_needs_its_value(api: APIClient) -> None:
    endpoint = make()
    # The probe: {"secret_headers": []} answered with the stored values in clear.
    response = patch(api, endpoint, {"secret_headers": []})
    assert response.status_code == 400, response.content
    assert "p-456" not in response.content.decode()
    assert "k-123" not in response.content.decode()
    masked = patch(
        api,
        endpoint,
        {"secret_headers": [], "custom_headers": {"X-Partner": MASK, "X-Api-Key": MASK}},
    )
    assert masked.status_code == 400, masked.content
    assert "p-456" not in masked.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.secret_header_names == ["X-Api-Key", "X-Partner"]

    # With its value, in the same request, it may be unmarked (the caller knows it).
    given = patch(
        api,
        endpoint,
        {"secret_headers": [], "custom_headers": {"X-Partner": "p-456", "X-Api-Key": MASK}},
    )
    assert given.status_code == 200, given.content
    # A credential-like name stays secret whatever the list says.
    assert given.json()["custom_headers"] == {"X-Partner": "p-456", "X-Api-Key": MASK}


@pytest.mark.django_db
def test_the_admin_refuses_to_send_masked_headers_to_a_new_origin(client: Client) -> None:
    client.force_login(User.objects.create_superuser("admin", "a@example.com", "pw"))
    endpoint = make()
    masked = json.dumps(endpoint.custom_headers_masked())
    # The change form as a browser posts it: the masked headers as shown, a new URL.
    form = endpoint_form(
        url="https://8.8.8.8/hook",
        event_types='["*"]',
        custom_headers=masked,
        secret_headers="X-Api-Key, X-Partner",
    )
    response = client.post(f"/admin/deliveries/endpoint/{endpoint.pk}/change/", form, follow=True)
    assert response.status_code == 200
    # The masked values sent back cannot go to the new host: the form says so.
    assert "another origin" in response.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.url == "https://1.1.1.1/hook"

    # Without the headers in the form the change goes through, and the admin says so.
    changed = client.post(
        f"/admin/deliveries/endpoint/{endpoint.pk}/change/",
        {**form, "custom_headers": json.dumps({"X-Tenant": "acme"}), "secret_headers": ""},
        follow=True,
    )
    assert changed.status_code == 200
    endpoint.refresh_from_db()
    assert endpoint.url == "https://8.8.8.8/hook"
    assert endpoint.secret_custom_headers == {}
