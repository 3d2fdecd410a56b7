"""The endpoint options over the HTTP API: filter, signature_scheme, envelope, public_key,
rotate-signing-key; every refusal a 400 naming the field, nothing half-written."""

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from deliveries import services
from deliveries.models import Endpoint, EndpointSigningKey
from tests.deliveries.api.helpers import (
    API,
    GOOD_ENDPOINT,
    body,
    create_endpoint,
    patch_json,
    post_json,
)
from webhooks_core.crypto import signing

pytestmark = pytest.mark.django_db


FILTER = {"data.amount": {"$gte": 100}, "data.currency": {"$in": ["EUR", "USD"]}}


def test_defaults_are_todays_behaviour(api: APIClient) -> None:
    created = create_endpoint(api)
    assert created["filter"] is None
    assert created["signature_scheme"] == "v1"
    assert created["envelope"] == "default"
    assert created["public_key"] is None
    assert not EndpointSigningKey.objects.exists()


def test_create_with_every_option(api: APIClient) -> None:
    created = create_endpoint(api, filter=FILTER, signature_scheme="v1,v1a", envelope="cloudevents")
    assert created["filter"] == FILTER
    assert created["signature_scheme"] == "v1,v1a"
    assert created["envelope"] == "cloudevents"
    assert created["public_key"].startswith("whpk_")
    assert created["secret"].startswith("whsec_")
    # The private key is never shown, anywhere.
    [key] = EndpointSigningKey.objects.filter(endpoint_id=created["id"])
    private = key.value
    assert private.startswith("whsk_")
    assert signing.public_key_of(private) == created["public_key"]
    read = body(api.get(f"{API}/endpoints/{created['id']}"))
    listed = body(api.get(f"{API}/endpoints"))
    for document in (created, read, listed):
        assert private not in json.dumps(document)
        assert "whsk_" not in json.dumps(document)
    assert read["public_key"] == created["public_key"]


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"filter": {"data.amount": {"$gte": True}}}, "filter", "filter.data.amount.$gte: must"),
        ({"filter": [1]}, "filter", "filter: must be a JSON object"),
        ({"filter": {"$or": []}}, "filter", "filter.$or: must be a non-empty list"),
        ({"filter": {"d": {"$regex": "(a)\\1"}}}, "filter", "filter.d.$regex: not a valid RE2"),
        ({"signature_scheme": "v2"}, "signature_scheme", ""),
        ({"signature_scheme": "v1a,v1"}, "signature_scheme", ""),
        ({"envelope": "soap"}, "envelope", ""),
    ],
)
def test_bad_options_are_400_naming_the_field(
    api: APIClient, fields: dict[str, Any], field: str, message: str
) -> None:
    response = post_json(api, f"{API}/endpoints", {**GOOD_ENDPOINT, **fields})
    assert response.status_code == 400, response.content
    errors = body(response)
    assert field in errors
    assert message in " ".join(errors[field])
    assert not Endpoint.objects.exists()

    existing = create_endpoint(api)
    response = patch_json(api, f"{API}/endpoints/{existing['id']}", fields)
    assert response.status_code == 400, response.content
    assert field in body(response)
    unchanged = Endpoint.objects.get(pk=existing["id"])
    assert (unchanged.filter, unchanged.signature_scheme, unchanged.envelope) == (
        None,
        "v1",
        "default",
    )


def test_patch_filter_and_clear_it(api: APIClient) -> None:
    created = create_endpoint(api)
    response = patch_json(api, f"{API}/endpoints/{created['id']}", {"filter": FILTER})
    assert response.status_code == 200, response.content
    assert body(response)["filter"] == FILTER
    response = patch_json(api, f"{API}/endpoints/{created['id']}", {"filter": {}})
    assert body(response)["filter"] is None
    assert Endpoint.objects.get(pk=created["id"]).filter is None


def test_switching_to_v1a_creates_a_key_pair_once(api: APIClient) -> None:
    created = create_endpoint(api)
    url = f"{API}/endpoints/{created['id']}"
    first = body(patch_json(api, url, {"signature_scheme": "v1a"}))["public_key"]
    assert first.startswith("whpk_")
    again = body(patch_json(api, url, {"signature_scheme": "v1,v1a"}))["public_key"]
    assert again == first
    assert EndpointSigningKey.objects.filter(endpoint_id=created["id"]).count() == 1


def test_rotate_signing_key(api: APIClient) -> None:
    created = create_endpoint(api, signature_scheme="v1a")
    url = f"{API}/endpoints/{created['id']}/rotate-signing-key"
    response = post_json(api, url, {"grace_seconds": 600})
    assert response.status_code == 200, response.content
    rotated = body(response)
    assert rotated["public_key"] != created["public_key"]
    assert rotated["grace_seconds"] == 600
    assert "whsk_" not in response.content.decode()
    read = body(api.get(f"{API}/endpoints/{created['id']}"))
    assert read["public_key"] == rotated["public_key"]
    endpoint = Endpoint.objects.get(pk=created["id"])
    assert services.endpoint_public_key(endpoint=endpoint) == rotated["public_key"]
    assert endpoint.signing_keys.filter(expires_at__isnull=False).count() == 1


def test_rotate_signing_key_of_a_v1_endpoint_is_400(api: APIClient) -> None:
    created = create_endpoint(api)
    response = post_json(api, f"{API}/endpoints/{created['id']}/rotate-signing-key", {})
    assert response.status_code == 400
    assert "signature_scheme" in body(response)
    assert not EndpointSigningKey.objects.exists()


def test_the_schema_documents_the_options(api: APIClient) -> None:
    schema = api.get(f"{API}/schema", HTTP_ACCEPT="application/json")
    text = schema.content.decode()
    for name in ("signature_scheme", "envelope", "public_key", "rotate-signing-key"):
        assert name in text
