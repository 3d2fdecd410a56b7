"""Every address that is not globally routable is refused, and the
operators' allowances (`WEBHOOKS_ALLOWED_NETWORKS`, DEBUG's loopback) never reach the
endpoints a tenant makes in the portal; `WEBHOOKS_PORTAL_ALLOWED_NETWORKS` may."""

import json
from typing import Any

import pytest
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper
from rest_framework.test import APIClient

from deliveries import conf
from deliveries.models import Endpoint
from tests.deliveries.portal.helpers import portal_client
from webhooks_core import conf as core_conf
from webhooks_core.egress import ssrf

NOTHING_ALLOWED = ssrf.AddressPolicy(allowed_networks=(), require_https=False)


@pytest.mark.parametrize(
    "address",
    ["fec0::1", "feff:ffff::1", "3fff::1", "fc00::1", "100.64.0.1", "192.0.0.9", "2002::1"],
)
def test_addresses_that_are_not_globally_routable_are_refused(address: str) -> None:
    assert ssrf.address_refusal(address, NOTHING_ALLOWED) is not None


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:4700::1111", "1.1.1.1"])
def test_public_addresses_pass(address: str) -> None:
    assert ssrf.address_refusal(address, NOTHING_ALLOWED) is None


def create(api: APIClient, url: str) -> Any:
    return api.post(
        "/api/v1/endpoints",
        data=json.dumps({"url": url, "event_types": ["*"]}),
        content_type="application/json",
    )


@pytest.mark.django_db
def test_the_api_refuses_a_site_local_address(api: APIClient) -> None:
    response = create(api, "http://[fec0::1]/hook")
    assert response.status_code == 400, response.content
    assert "site-local" in " ".join(response.json()["url"])
    assert not Endpoint.objects.exists()


def portal_add(client: Client, url: str) -> Any:
    return client.post("/portal/endpoints/new", {"url": url, "event_types": ["invoice.paid"]})


@pytest.mark.django_db
def test_the_operators_allowance_never_reaches_the_portal(
    api: APIClient, settings: SettingsWrapper
) -> None:
    # The suite allows loopback for operators (WEBHOOKS_ALLOWED_NETWORKS=127.0.0.0/8,::1).
    assert create(api, "http://127.0.0.1:9/hook").status_code == 201
    client = portal_client("acme")
    refused = portal_add(client, "http://127.0.0.1:9/hook")
    assert refused.status_code == 200
    page = refused.content.decode()
    assert 'role="alert"' in page
    assert "public addresses only" in page
    assert "WEBHOOKS_ALLOWED_NETWORKS" not in page  # a tenant is told the rule, not our settings
    assert not Endpoint.objects.filter(tenant="acme").exists()

    # Nor does DEBUG's loopback allowance.
    del settings.WEBHOOKS_ALLOWED_NETWORKS
    settings.DEBUG = True
    assert "127.0.0.0/8" in core_conf.ssrf().allowed_networks
    assert 'role="alert"' in portal_add(client, "http://127.0.0.1:9/hook").content.decode()
    assert not Endpoint.objects.filter(tenant="acme").exists()


@pytest.mark.django_db
def test_a_tenant_cannot_re_point_an_endpoint_at_an_allowed_network(
    settings: SettingsWrapper,
) -> None:
    client = portal_client("acme")
    assert portal_add(client, "https://93.184.215.14/hook").status_code == 200
    endpoint = Endpoint.objects.get(tenant="acme")
    assert endpoint.url_chosen_in_portal
    refused = client.post(
        f"/portal/endpoints/{endpoint.pk}/edit",
        {"url": "http://127.0.0.1:9/hook", "event_types": ["invoice.paid"]},
    )
    assert 'role="alert"' in refused.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.url == "https://93.184.215.14/hook"
    # The policy its requests go out under is the portal's, at connect time too.
    assert conf.endpoint_address_policy(endpoint) == conf.portal_address_policy()
    assert ssrf.url_refusal("http://127.0.0.1:9/", conf.endpoint_address_policy(endpoint))


@pytest.mark.django_db
def test_the_portal_setting_opens_a_network_to_tenants(settings: SettingsWrapper) -> None:
    settings.WEBHOOKS_PORTAL_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    client = portal_client("acme")
    assert portal_add(client, "http://127.0.0.1:9/hook").status_code == 200
    endpoint = Endpoint.objects.get(tenant="acme")
    assert endpoint.url_chosen_in_portal


@pytest.mark.django_db
def test_an_operator_re_pointing_a_portal_endpoint_makes_the_url_theirs(api: APIClient) -> None:
    client = portal_client("acme")
    portal_add(client, "https://93.184.215.14/hook")
    endpoint = Endpoint.objects.get(tenant="acme")
    response = api.patch(
        f"/api/v1/endpoints/{endpoint.pk}",
        data=json.dumps({"url": "http://127.0.0.1:9/hook"}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    endpoint.refresh_from_db()
    assert not endpoint.url_chosen_in_portal


def test_a_bad_portal_network_fails_the_system_check(settings: SettingsWrapper) -> None:
    from deliveries.checks import check_allowed_networks

    settings.WEBHOOKS_PORTAL_ALLOWED_NETWORKS = ["not-a-network"]
    (error,) = check_allowed_networks(None)
    assert "WEBHOOKS_PORTAL_ALLOWED_NETWORKS" in error.msg
