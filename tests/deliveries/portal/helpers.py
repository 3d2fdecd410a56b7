"""Opening a tenant's portal in a test client, the way a tenant does: through its link."""

from urllib.parse import urlsplit

from django.test import Client

from deliveries import services


def link_path(tenant: str, expires_in: int = 3600) -> str:
    _, token = services.portal_link_create(tenant=tenant, expires_in=expires_in)
    return f"/portal/open/{token}"


def portal_client(tenant: str, *, enforce_csrf_checks: bool = False) -> Client:
    client = Client(enforce_csrf_checks=enforce_csrf_checks)
    response = client.get(link_path(tenant))
    assert response.status_code == 302, response.content
    assert urlsplit(response["Location"]).path == "/portal/"
    return client
