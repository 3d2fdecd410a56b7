"""A tenant names its own broker in the portal: the password is stored
encrypted and never shown again, and the portal's address rules apply to the broker."""

from typing import Any

import pytest

from deliveries.models import Endpoint
from webhooks_core.crypto import encryption

from .helpers import portal_client

pytestmark = pytest.mark.django_db


def text(response: Any) -> str:
    return str(response.content.decode())


def test_a_tenant_adds_a_broker_endpoint_and_sees_its_password_masked() -> None:
    client = portal_client("acme")
    response = client.post(
        "/portal/endpoints/new",
        {"url": "amqps://app:s3cret-pw@mq.acme.example/prod?exchange=hooks", "event_types": ["*"]},
    )
    assert response.status_code == 200
    assert "s3cret-pw" not in text(response)
    endpoint = Endpoint.objects.get()
    assert endpoint.url == "amqps://app:***@mq.acme.example/prod?exchange=hooks"
    assert encryption.decrypt(endpoint.url_password) == "s3cret-pw"
    for page in (
        "/portal/",
        f"/portal/endpoints/{endpoint.pk}/",
        f"/portal/endpoints/{endpoint.pk}/edit",
    ):
        shown = client.get(page)
        assert shown.status_code == 200, page
        assert "s3cret-pw" not in text(shown)
    assert "app:***@mq.acme.example" in text(client.get(f"/portal/endpoints/{endpoint.pk}/edit"))

    # The edit form sent back as shown keeps the password.
    kept = client.post(
        f"/portal/endpoints/{endpoint.pk}/edit",
        {"url": endpoint.url, "description": "renamed", "event_types": ["*"]},
    )
    assert kept.status_code == 302, text(kept)
    endpoint.refresh_from_db()
    assert (endpoint.description, encryption.decrypt(endpoint.url_password)) == (
        "renamed",
        "s3cret-pw",
    )


def test_the_portal_address_rules_apply_to_brokers() -> None:
    client = portal_client("acme")
    for url in (
        "amqp://10.0.0.1/?exchange=x",
        "nats://intranet.example.com?subject=a",
        "redis://127.0.0.1:6379/0?stream=s",
        "redis://mq.acme.example:6379/0",
    ):
        response = client.post("/portal/endpoints/new", {"url": url, "event_types": ["*"]})
        assert response.status_code == 200
        assert 'role="alert"' in text(response), url
    assert not Endpoint.objects.exists()
