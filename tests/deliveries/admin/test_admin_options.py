"""The endpoint options in the admin: the same service rules as the API, the public key on
the endpoint's page, the key pair rotation action."""

import pytest
from django.test import Client

from deliveries import services
from deliveries.models import Endpoint, EndpointSigningKey
from tests.deliveries.admin.helpers import ADMIN, act, endpoint_form
from tests.fixtures import new_endpoint

pytestmark = pytest.mark.django_db


def test_admin_add_with_a_filter_and_v1a(superuser: Client) -> None:
    response = superuser.post(
        f"{ADMIN}/endpoint/add/",
        endpoint_form(
            filter='{"data.amount": {"$gte": 100}}',
            signature_scheme="v1a",
            envelope="cloudevents",
        ),
    )
    assert response.status_code == 200, response.content.decode()[:2000]
    created = Endpoint.objects.get()
    assert created.filter == {"data.amount": {"$gte": 100}}
    assert (created.signature_scheme, created.envelope) == ("v1a", "cloudevents")
    key = EndpointSigningKey.objects.get(endpoint=created)
    page = superuser.get(f"{ADMIN}/endpoint/{created.pk}/change/").content.decode()
    assert key.public_key in page
    assert key.value not in page
    assert "whsk_" not in page


def test_admin_without_the_option_fields_keeps_the_defaults(superuser: Client) -> None:
    response = superuser.post(f"{ADMIN}/endpoint/add/", endpoint_form())
    assert response.status_code == 200
    created = Endpoint.objects.get()
    assert (created.filter, created.signature_scheme, created.envelope) == (None, "v1", "default")
    assert not EndpointSigningKey.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"filter": '{"data.amount": {"$gte": true}}'}, "filter.data.amount.$gte: must be"),
        ({"filter": '{"x": {"$regex": "(a"}}'}, "not a valid RE2 pattern"),
        ({"signature_scheme": "v2"}, "Select a valid choice"),
    ],
)
def test_admin_refuses_bad_options_and_writes_nothing(
    superuser: Client, overrides: dict[str, str], problem: str
) -> None:
    response = superuser.post(f"{ADMIN}/endpoint/add/", endpoint_form(**overrides))
    assert response.status_code == 200
    assert problem in response.content.decode()
    assert not Endpoint.objects.exists()
    ep = new_endpoint("https://kept.example.com/hook")
    response = superuser.post(
        f"{ADMIN}/endpoint/{ep.pk}/change/",
        endpoint_form(url="https://kept.example.com/hook", event_types='["*"]', **overrides),
    )
    assert problem in response.content.decode()
    assert Endpoint.objects.get(pk=ep.pk).filter is None


def test_admin_rotates_key_pairs_of_v1a_endpoints_only(operator: Client) -> None:
    signed, _ = services.endpoint_create(
        url="https://v1a.example.com/hook", event_types=["*"], signature_scheme="v1a"
    )
    plain = new_endpoint("https://v1.example.com/hook")
    before = services.endpoint_public_key(endpoint=signed)

    response = act(operator, "endpoint", "rotate_signing_key", [signed.pk, plain.pk])

    page = response.content.decode()
    assert "1 key pair(s) rotated" in page
    assert "not rotated" in page
    assert services.endpoint_public_key(endpoint=signed) != before
    assert signed.signing_keys.count() == 2
    assert not plain.signing_keys.exists()
