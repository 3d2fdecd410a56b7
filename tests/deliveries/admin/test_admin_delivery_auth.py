"""The admin's endpoint form carries the delivery-auth fields (OAuth2 client
credentials, mutual TLS); the secrets are write-only and the services' rules apply."""

import logging

import pytest
from django.test import Client

from deliveries.models import Endpoint
from tests.deliveries.admin.helpers import ADMIN, endpoint_form
from tests.deliveries.auth_peers import PKI

pytestmark = pytest.mark.django_db

SECRET = "adm1n-client-secret"


def oauth2_fields(**overrides: str) -> dict[str, str]:
    return {
        "auth_type": "oauth2_client_credentials",
        "oauth2_token_url": "https://1.1.1.1/oauth/token",
        "oauth2_client_id": "cid",
        "oauth2_client_secret": SECRET,
        "oauth2_scope": "hooks",
        "oauth2_audience": "",
        **overrides,
    }


def test_the_add_form_shows_the_fields_and_saves_through_the_service(
    superuser: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    page = superuser.get(f"{ADMIN}/endpoint/add/").content.decode()
    for name in (
        "auth_type",
        "oauth2_token_url",
        "oauth2_client_secret",
        "client_certificate",
        "client_key",
        "ca_certificates",
    ):
        assert f'name="{name}"' in page, name
    assert 'type="password" name="oauth2_client_secret"' in page

    pki = PKI.create()
    client = pki.issue("sender", client=True)
    response = superuser.post(
        f"{ADMIN}/endpoint/add/",
        endpoint_form(
            **oauth2_fields(),
            client_certificate=client.certificate.replace("\n", "\r\n"),
            client_key=client.key.replace("\n", "\r\n"),
            ca_certificates=pki.ca.certificate,
        ),
    )
    assert response.status_code == 200, response.content.decode()[:2000]
    endpoint = Endpoint.objects.get()
    credentials = endpoint.oauth2_credentials()
    assert credentials is not None
    assert credentials.client_secret == SECRET
    assert endpoint.encrypted_client_key
    assert SECRET not in caplog.text

    change = superuser.get(f"{ADMIN}/endpoint/{endpoint.pk}/change/").content.decode()
    assert SECRET not in change
    assert "PRIVATE KEY" not in change
    assert client.certificate.splitlines()[1] in change  # the certificate is public
    assert 'value="https://1.1.1.1/oauth/token"' in change


def test_a_change_that_leaves_the_secrets_empty_keeps_them(superuser: Client) -> None:
    superuser.post(f"{ADMIN}/endpoint/add/", endpoint_form(**oauth2_fields()))
    endpoint = Endpoint.objects.get()
    response = superuser.post(
        f"{ADMIN}/endpoint/{endpoint.pk}/change/",
        endpoint_form(**oauth2_fields(oauth2_client_secret="", oauth2_scope="other")),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    endpoint.refresh_from_db()
    credentials = endpoint.oauth2_credentials()
    assert credentials is not None
    assert (credentials.client_secret, credentials.scope) == (SECRET, "other")

    cleared = superuser.post(f"{ADMIN}/endpoint/{endpoint.pk}/change/", endpoint_form(auth_type=""))
    assert cleared.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.auth is None


def test_the_services_refusals_are_field_errors(superuser: Client) -> None:
    pki = PKI.create()
    client = pki.issue("sender", client=True)
    other = pki.issue("other", client=True)
    response = superuser.post(
        f"{ADMIN}/endpoint/add/",
        endpoint_form(
            **oauth2_fields(oauth2_client_secret="", oauth2_token_url="https://10.0.0.1/t"),
            client_certificate=client.certificate,
            client_key=other.key,
        ),
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "does not match the certificate" in page
    assert "10.0.0.1 is a private address" in page
    assert "Give &quot;client_secret&quot;" in page
    assert not Endpoint.objects.exists()
