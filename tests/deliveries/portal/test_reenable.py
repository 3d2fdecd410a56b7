"""What a tenant may make active again in the portal, and what the
portal says about why an endpoint is not active.

Only what the failures suspended, after a test event its endpoint answered with 2xx, or
what the tenant disabled itself; never what an operator suspended or disabled. The "why"
never names anyone of the operator's team.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from deliveries import services
from deliveries.endpoints.suspension import endpoint_suspend_automatically
from deliveries.models import Delivery, DeliveryStatus, Endpoint, EndpointState, Event, StateSetBy
from tests.deliveries.portal.helpers import delivery_to, endpoint_of, text
from tests.receiver import Receiver

from .helpers import portal_client

pytestmark = pytest.mark.django_db(transaction=True)


def operator_client(username: str = "alice.ops") -> Client:
    User.objects.create_superuser(username, f"{username}@example.com", "pw")
    client = Client()
    client.login(username=username, password="pw")
    return client


def admin_action(client: Client, action: str, endpoint: Endpoint, **extra: Any) -> None:
    response = client.post(
        "/admin/deliveries/endpoint/",
        {"action": action, "_selected_action": [str(endpoint.pk)], **extra},
    )
    assert response.status_code in (200, 302), response.content


def state_of(endpoint: Endpoint) -> tuple[str, str]:
    endpoint.refresh_from_db()
    return endpoint.state, endpoint.state_set_by


def test_an_operators_suspension_stays_and_the_why_names_nobody() -> None:
    ours = endpoint_of("acme")
    admin_action(operator_client("alice.ops"), "suspend_endpoints", ours)
    assert state_of(ours) == (EndpointState.SUSPENDED, StateSetBy.OPERATOR)

    tenant = portal_client("acme")
    page = text(tenant.get(f"/portal/endpoints/{ours.pk}/"))
    assert "alice.ops" not in page
    assert "suspended by the operator of this service" in page
    assert "Only the operator of this service can enable it again." in page
    assert "Resume (send what was held)" not in page

    refused = tenant.post(f"/portal/endpoints/{ours.pk}/state", {"state": "active"})
    assert refused.status_code == 403
    assert "Only the operator of this service can enable" in text(refused)
    assert state_of(ours) == (EndpointState.SUSPENDED, StateSetBy.OPERATOR)
    # Nor through a detour: disabling it first would make it the tenant's to enable.
    tenant.post(f"/portal/endpoints/{ours.pk}/state", {"state": "disabled"})
    assert state_of(ours) == (EndpointState.SUSPENDED, StateSetBy.OPERATOR)
    assert tenant.post(f"/portal/endpoints/{ours.pk}/test").status_code in (302, 200)
    assert state_of(ours) == (EndpointState.SUSPENDED, StateSetBy.OPERATOR)


def test_an_operators_disabling_through_the_api_stays() -> None:
    ours = endpoint_of("acme")
    services.endpoint_update(endpoint=ours, state=EndpointState.DISABLED)
    assert state_of(ours) == (EndpointState.DISABLED, StateSetBy.OPERATOR)
    tenant = portal_client("acme")
    assert "Enable</button>" not in text(tenant.get(f"/portal/endpoints/{ours.pk}/"))
    refused = tenant.post(f"/portal/endpoints/{ours.pk}/state", {"state": "active"})
    assert refused.status_code == 403
    assert state_of(ours) == (EndpointState.DISABLED, StateSetBy.OPERATOR)


def test_what_the_tenant_disabled_it_may_enable() -> None:
    ours = endpoint_of("acme")
    tenant = portal_client("acme")
    tenant.post(f"/portal/endpoints/{ours.pk}/state", {"state": "disabled"})
    assert state_of(ours) == (EndpointState.DISABLED, StateSetBy.TENANT)
    assert "You disabled it." in text(tenant.get(f"/portal/endpoints/{ours.pk}/"))
    tenant.post(f"/portal/endpoints/{ours.pk}/state", {"state": "active"})
    assert state_of(ours) == (EndpointState.ACTIVE, StateSetBy.NOBODY)


def test_a_suspension_of_the_failures_lifts_after_a_test_event_answered_2xx(
    receiver: Receiver,
) -> None:
    ours = endpoint_of("acme", url=receiver.url + "/acme")
    held = delivery_to(ours, DeliveryStatus.PENDING)
    endpoint_suspend_automatically(endpoint_id=ours.pk, reason="20 consecutive failed attempts")
    assert state_of(ours) == (EndpointState.SUSPENDED, StateSetBy.FAILURES)
    held.refresh_from_db()
    assert held.status == DeliveryStatus.HELD
    tenant = portal_client("acme")
    page = text(tenant.get(f"/portal/endpoints/{ours.pk}/"))
    assert "20 consecutive failed attempts" in page  # the failures' own words

    # Not before a test event.
    first = tenant.post(f"/portal/endpoints/{ours.pk}/state", {"state": "active"})
    assert first.status_code == 403
    assert "Send a test event first" in text(first)
    assert state_of(ours)[0] == EndpointState.SUSPENDED

    # A test event the receiver refuses: still not.
    receiver.script(503)
    failed = text(tenant.post(f"/portal/endpoints/{ours.pk}/test"))
    assert "answered the test event with HTTP 503" in failed
    [sent] = receiver.wait_for(1)
    assert sent.headers["X-Webhook-Event"] == "webhook.test"
    assert "v1=" in sent.headers["X-Webhook-Signature"]
    assert tenant.post(f"/portal/endpoints/{ours.pk}/state", {"state": "active"}).status_code == 403

    # One it answers 2xx: now the tenant may resume, and what was held goes out.
    ok = text(tenant.post(f"/portal/endpoints/{ours.pk}/test"))
    assert "you can resume it now" in ok
    assert state_of(ours)[0] == EndpointState.SUSPENDED  # a test alone resumes nothing
    resumed = tenant.post(f"/portal/endpoints/{ours.pk}/state", {"state": "active"})
    assert resumed.status_code == 302
    assert state_of(ours) == (EndpointState.ACTIVE, StateSetBy.NOBODY)
    held.refresh_from_db()
    assert held.status == DeliveryStatus.PENDING
    # The test events wrote no delivery or event.
    assert not Event.objects.filter(type="webhook.test").exists()
    assert Delivery.objects.filter(endpoint=ours).count() == 1


def test_a_new_suspension_voids_an_earlier_successful_test(receiver: Receiver) -> None:
    ours = endpoint_of("acme", url=receiver.url + "/acme")
    endpoint_suspend_automatically(endpoint_id=ours.pk, reason="failing")
    tenant = portal_client("acme")
    tenant.post(f"/portal/endpoints/{ours.pk}/test")
    ours.refresh_from_db()
    assert services.endpoint_tenant_may_enable(ours)
    services.endpoint_resume(endpoint_id=ours.pk)
    endpoint_suspend_automatically(endpoint_id=ours.pk, reason="failing again")
    ours.refresh_from_db()
    assert not services.endpoint_tenant_may_enable(ours)
