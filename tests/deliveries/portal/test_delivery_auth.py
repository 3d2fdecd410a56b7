"""A tenant sets its endpoint's delivery auth in the portal, under the same rules
(and the portal's SSRF policy for the token URL); the secrets are write-only."""

import pytest

from deliveries.models import Endpoint
from tests.deliveries.auth_peers import PKI

from .helpers import portal_client

pytestmark = pytest.mark.django_db

SECRET = "p0rtal-client-secret"


def fields(**overrides: str) -> dict[str, object]:
    return {
        "url": "https://hooks.acme.example/in",
        "description": "billing",
        "event_types": ["*"],
        "auth_type": "oauth2_client_credentials",
        "oauth2_token_url": "https://auth.acme.example/token",
        "oauth2_client_id": "acme-client",
        "oauth2_client_secret": SECRET,
        **overrides,
    }


def test_a_tenant_adds_an_endpoint_with_oauth2_and_mutual_tls() -> None:
    client = portal_client("acme")
    form = client.get("/portal/endpoints/new").content.decode()
    for name in ("auth_type", "oauth2_client_secret", "client_certificate", "client_key"):
        assert f'name="{name}"' in form
    pki = PKI.create()
    issued = pki.issue("acme sender", client=True)
    response = client.post(
        "/portal/endpoints/new",
        fields(client_certificate=issued.certificate, client_key=issued.key),
    )
    assert response.status_code == 200
    endpoint = Endpoint.objects.get()
    credentials = endpoint.oauth2_credentials()
    assert credentials is not None
    assert credentials.client_secret == SECRET
    assert endpoint.encrypted_client_key

    edit = client.get(f"/portal/endpoints/{endpoint.pk}/edit").content.decode()
    assert SECRET not in edit
    assert "PRIVATE KEY" not in edit
    assert 'value="https://auth.acme.example/token"' in edit

    kept = client.post(
        f"/portal/endpoints/{endpoint.pk}/edit",
        fields(oauth2_client_secret="", client_certificate=issued.certificate),
    )
    assert kept.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.oauth2_credentials().client_secret == SECRET  # type: ignore[union-attr]
    assert endpoint.encrypted_client_key


def test_the_token_url_is_judged_by_the_portals_policy() -> None:
    client = portal_client("acme")
    response = client.post(
        "/portal/endpoints/new", fields(oauth2_token_url="https://intranet.example.com/token")
    )
    assert response.status_code == 200
    assert "webhooks go to public addresses only" in response.content.decode()
    assert not Endpoint.objects.exists()
