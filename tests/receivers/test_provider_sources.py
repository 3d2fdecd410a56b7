"""Sources of the six providers, created through the API and the admin, then
receiving a signed request; secrets and public URLs that could never work are refused."""

import json
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from receivers.models import InboxEvent, Source
from tests.receivers.providers import BY_NAME, PROVIDERS, Provider, Signed
from webhooks_core.crypto import signing

pytestmark = pytest.mark.django_db

API = "/api/v1"
HMAC_SCHEMES = ["slack", "twilio", "shopify", "paddle", "square"]
PUBLIC_URL = "https://hooks.example.com/inbound/provider"


def create(api: APIClient, **fields: Any) -> Any:
    return api.post(f"{API}/sources", data=json.dumps(fields), content_type="application/json")


def send(slug: str, signed: Signed) -> Any:
    path = f"/receivers/{slug}/" + (f"?{signed.query}" if signed.query else "")
    return Client().post(
        path, data=signed.body, content_type=signed.content_type, headers=signed.headers
    )


def url_for(provider: Provider, slug: str) -> str:
    return PUBLIC_URL if provider.signs_url else f"http://testserver/receivers/{slug}/"


@pytest.mark.parametrize("provider", PROVIDERS, ids=str)
def test_api_creates_a_source_of_each_provider_that_then_receives(
    api: APIClient, provider: Provider
) -> None:
    key = provider.new_key()
    fields: dict[str, Any] = {"slug": "inbound", "scheme": provider.scheme, "secret": key.secret}
    if provider.signs_url:
        fields["public_url"] = PUBLIC_URL

    response = create(api, **fields)

    assert response.status_code == 201, response.content
    created = response.json()
    assert created["scheme"] == provider.scheme
    assert created["public_url"] == fields.get("public_url")  # null when unset
    assert created["secret"] == key.secret  # shown once, as given
    assert api.get(f"{API}/sources/{created['id']}").json()["public_url"] == created["public_url"]
    signed = provider.request(key, "evt-api", url=url_for(provider, "inbound"))
    assert send("inbound", signed).status_code == 200
    assert InboxEvent.objects.filter(event_id="evt-api").exists()


@pytest.mark.parametrize("provider", PROVIDERS, ids=str)
def test_api_needs_the_providers_secret(api: APIClient, provider: Provider) -> None:
    response = create(api, slug="inbound", scheme=provider.scheme)
    assert response.status_code == 400
    assert "needs the secret the provider gave you" in response.json()["secret"][0]
    assert not Source.objects.exists()


@pytest.mark.parametrize("scheme", HMAC_SCHEMES)
def test_api_refuses_a_public_key_as_an_hmac_secret(api: APIClient, scheme: str) -> None:
    _, public_key = signing.generate_key_pair()
    response = create(api, slug="inbound", scheme=scheme, secret=public_key)
    assert response.status_code == 400
    [message] = response.json()["secret"]
    assert "whpk_" in message
    assert "public key" in message
    assert public_key not in response.content.decode()
    assert not Source.objects.exists()


def test_api_refuses_a_sendgrid_secret_that_is_not_its_verification_key(api: APIClient) -> None:
    response = create(api, slug="inbound", scheme="sendgrid", secret=signing.generate_secret())
    assert response.status_code == 400
    assert "P-256" in response.json()["secret"][0]


@pytest.mark.parametrize(
    "public_url",
    [
        "https://hooks.example.com/twilio?x=1",
        "https://hooks.example.com/twilio#frag",
        "ftp://hooks.example.com/twilio",
        "not a url",
    ],
)
def test_api_refuses_a_public_url_that_cannot_be_what_is_signed(
    api: APIClient, public_url: str
) -> None:
    key = BY_NAME["twilio"].new_key()
    response = create(
        api, slug="inbound", scheme="twilio", secret=key.secret, public_url=public_url
    )
    assert response.status_code == 400, response.content
    assert response.json()["public_url"]
    assert not Source.objects.exists()


def test_api_takes_null_or_empty_as_no_public_url(api: APIClient) -> None:
    for n, public_url in enumerate([None, ""]):
        key = BY_NAME["square"].new_key()
        response = create(
            api, slug=f"square-{n}", scheme="square", secret=key.secret, public_url=public_url
        )
        assert response.status_code == 201, response.content
        assert response.json()["public_url"] is None
        assert Source.objects.get(slug=f"square-{n}").public_url == ""


def test_api_refuses_an_unknown_scheme(api: APIClient) -> None:
    response = create(api, slug="inbound", scheme="mailgun", secret="x")
    assert response.status_code == 400
    assert response.json()["scheme"]


ADD_FORM = {
    "slug": "inbound",
    "secret": "",
    "description": "",
    "enabled": "on",
    "tolerance_seconds": "300",
    "max_body_bytes": str(256 * 1024),
    "expected_account": "",
    "expected_mode": "",
    "public_url": "",
    "api_base_url": "",
    "api_token": "",
}


@pytest.mark.parametrize("provider", PROVIDERS, ids=str)
def test_admin_adds_a_source_of_each_provider_that_then_receives(
    staff: Client, provider: Provider
) -> None:
    key = provider.new_key()
    form = {**ADD_FORM, "scheme": provider.scheme, "secret": key.secret}
    if provider.signs_url:
        form["public_url"] = PUBLIC_URL

    response = staff.post("/admin/receivers/source/add/", form)

    assert response.status_code == 302, response.content.decode()[:3000]
    source = Source.objects.get(slug="inbound")
    assert (source.scheme, source.public_url) == (provider.scheme, form["public_url"])
    page = staff.get(f"/admin/receivers/source/{source.pk}/change/").content.decode()
    assert key.secret not in page
    signed = provider.request(key, "evt-admin", url=url_for(provider, "inbound"))
    assert send("inbound", signed).status_code == 200


def test_admin_changes_the_public_url(staff: Client) -> None:
    provider = BY_NAME["square"]
    key = provider.new_key()
    staff.post(
        "/admin/receivers/source/add/",
        {**ADD_FORM, "scheme": "square", "secret": key.secret, "public_url": PUBLIC_URL},
    )
    source = Source.objects.get(slug="inbound")
    moved = "https://new-hooks.example.com/square"
    change = {
        **ADD_FORM,
        "scheme": "square",
        "public_url": moved,
        "secrets-TOTAL_FORMS": "1",
        "secrets-INITIAL_FORMS": "1",
        "secrets-MIN_NUM_FORMS": "0",
        "secrets-MAX_NUM_FORMS": "1000",
        "secrets-0-id": str(source.secrets.get().pk),
        "secrets-0-source": str(source.pk),
    }
    del change["secret"]
    response = staff.post(f"/admin/receivers/source/{source.pk}/change/", change)
    assert response.status_code == 302, response.content.decode()[:3000]
    source.refresh_from_db()
    assert source.public_url == moved
    assert send("inbound", provider.request(key, "evt-moved", url=moved)).status_code == 200
    assert send("inbound", provider.request(key, "evt-old", url=PUBLIC_URL)).status_code == 401

    change["public_url"] = moved + "?query=1"
    refused = staff.post(f"/admin/receivers/source/{source.pk}/change/", change)
    assert refused.status_code == 200
    assert "query string" in refused.content.decode()


@pytest.mark.parametrize("scheme", HMAC_SCHEMES)
def test_admin_refuses_a_public_key_as_an_hmac_secret(staff: Client, scheme: str) -> None:
    _, public_key = signing.generate_key_pair()
    form = {**ADD_FORM, "scheme": scheme, "secret": public_key}
    response = staff.post("/admin/receivers/source/add/", form)
    assert response.status_code == 200
    assert "whpk_" in response.content.decode()
    assert not Source.objects.exists()
