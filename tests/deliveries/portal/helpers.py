"""Opening a tenant's portal in a test client, the way a tenant does: through its link."""

import re
from typing import Any
from urllib.parse import urlsplit

from django.test import Client
from django.utils import timezone

from deliveries import services
from deliveries.models import (
    Delivery,
    DeliveryStatus,
    Endpoint,
    Event,
)
from tests.fixtures import new_endpoint


def link_path(tenant: str, expires_in: int = 3600) -> str:
    _, token = services.portal_link_create(tenant=tenant, expires_in=expires_in)
    return f"/portal/open/{token}"


def csrf_token_of(html: str) -> str:
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert match is not None, "no CSRF token in the page"
    return match.group(1)


def open_with(client: Client, path: str) -> None:
    """What a person does with a link: GET shows a page with one button, which posts."""
    page = client.get(path)
    assert page.status_code == 200, page.content
    response = client.post(path, {"csrfmiddlewaretoken": csrf_token_of(page.content.decode())})
    assert response.status_code == 302, response.content
    assert urlsplit(response["Location"]).path == "/portal/"


def portal_client(tenant: str, *, enforce_csrf_checks: bool = False) -> Client:
    client = Client(enforce_csrf_checks=enforce_csrf_checks)
    open_with(client, link_path(tenant))
    return client


def endpoint_of(
    tenant: str | None, url: str = "https://hooks.example.com/x", **kw: Any
) -> Endpoint:
    return new_endpoint(url, tenant=tenant, description=f"{tenant} hook", **kw)


def delivery_to(endpoint: Endpoint, status: str = DeliveryStatus.DEAD_LETTERED) -> Delivery:
    event = Event.objects.create(
        type="invoice.paid",
        data={},
        occurred_at=timezone.now(),
        fanned_out_at=timezone.now(),
        tenant=endpoint.tenant,
    )
    return Delivery.objects.create(event=event, endpoint=endpoint, status=status, attempts=3)


def text(response: Any) -> str:
    return str(response.content.decode())
