"""The sending side's selectors keep to the tenant they are given: another tenant's
endpoints and deliveries are never among the rows, whatever the filters say."""

from datetime import timedelta

import pytest
from django.utils import timezone

from deliveries import selectors
from deliveries.models import DeliveryStatus, Endpoint, EndpointState
from tests.deliveries.portal.helpers import delivery_to

pytestmark = pytest.mark.django_db


def endpoint_of(tenant: str | None, **fields: object) -> Endpoint:
    return Endpoint.objects.create(
        url=f"https://{tenant or 'none'}.example.com/hook", tenant=tenant, **fields
    )


def test_tenant_scopes_hold_only_the_tenants_rows() -> None:
    # Given two tenants and an endpoint with no tenant, each with a delivery
    acme, globex, nobody = endpoint_of("acme"), endpoint_of("globex"), endpoint_of(None)
    mine, theirs, no_ones = delivery_to(acme), delivery_to(globex), delivery_to(nobody)

    # Then acme's scopes hold acme's rows only
    assert list(selectors.tenant_endpoints(tenant="acme")) == [acme]
    assert list(selectors.tenant_deliveries(tenant="acme")) == [mine]
    # Narrowing by another tenant's endpoint or event finds nothing, never their rows
    scoped = selectors.tenant_deliveries(tenant="acme")
    assert not selectors.deliveries_filtered(scoped, endpoint_id=globex.pk).exists()
    assert not selectors.deliveries_filtered(scoped, event_id=theirs.event_id).exists()
    assert not selectors.deliveries_filtered(scoped, tenant="globex").exists()
    details = selectors.delivery_details(scoped)
    assert not details.filter(pk__in=[theirs.pk, no_ones.pk]).exists()
    assert selectors.endpoint_recent_deliveries(scoped, endpoint_id=globex.pk) == []


def test_failed_deliveries_are_the_tenants_dead_letters_to_active_endpoints() -> None:
    acme, paused = endpoint_of("acme"), endpoint_of("acme")
    Endpoint.objects.filter(pk=paused.pk).update(state=EndpointState.SUSPENDED)
    failed = delivery_to(acme)
    delivery_to(acme, DeliveryStatus.SUCCEEDED)
    delivery_to(paused)
    delivery_to(endpoint_of("globex"))
    since = timezone.now() - timedelta(hours=1)

    assert list(selectors.failed_deliveries(tenant="acme", since=since)) == [failed]
    assert not selectors.failed_deliveries(
        tenant="acme", since=since, endpoint_id=paused.pk
    ).exists()
    assert not selectors.failed_deliveries(tenant="acme", since=timezone.now()).exists()


def test_the_filters_of_the_lists_combine() -> None:
    acme = endpoint_of("acme")
    dead, pending = delivery_to(acme), delivery_to(acme, DeliveryStatus.PENDING)
    scoped = selectors.tenant_deliveries(tenant="acme")

    assert set(selectors.deliveries_filtered(scoped)) == {dead, pending}
    assert list(selectors.deliveries_filtered(scoped, status=DeliveryStatus.PENDING)) == [pending]
    assert list(
        selectors.deliveries_filtered(scoped, event_type="invoice.paid", event_id=dead.event_id)
    ) == [dead]
    assert not selectors.deliveries_filtered(scoped, event_type="invoice.voided").exists()
    later = timezone.now() + timedelta(minutes=1)
    assert not selectors.deliveries_filtered(scoped, since=later).exists()
