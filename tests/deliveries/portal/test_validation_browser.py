"""The CloudEvents handshake in the portal, in a real headless Chromium: a tenant's new
endpoint waits for its target's consent, shows why, and asks again with one button."""

from typing import Any

import pytest

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus, Endpoint, ValidationState
from tests.browser import require_chromium
from tests.conftest import wait_until
from tests.deliveries.helpers import ORIGIN, consent, ok_without_consent
from tests.deliveries.portal.browser import new_page, portal_link, shot
from tests.receiver import Receiver

require_chromium()

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_tenant_sees_the_consent_and_asks_again(
    celery_worker: object, receiver: Receiver, live_server: Any, browser: Any, settings: Any
) -> None:
    settings.WEBHOOKS_PORTAL_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1"]
    settings.WEBHOOKS_PORTAL_ENDPOINT_VALIDATION = "cloudevents"
    settings.WEBHOOKS_VALIDATION_ORIGIN = ORIGIN
    receiver.options_handler = ok_without_consent

    page = new_page(browser)
    page.goto(portal_link(live_server, "acme"))
    page.click("button:has-text('Open the portal')")
    page.wait_for_url(f"{live_server.url}/portal/")
    page.click("text=Add an endpoint")
    page.fill("#id_url", receiver.url + "/acme")
    page.check('input[name="event_types"][value="invoice.paid"]')
    page.click("button:has-text('Add the endpoint')")
    page.wait_for_selector("text=Your new signing secret")
    ours = Endpoint.objects.get(tenant="acme")
    assert ours.validation == "cloudevents"
    wait_until(
        lambda: Endpoint.objects.get(pk=ours.pk).validation_state == ValidationState.REFUSED,
        what="refused",
    )
    event = services.emit("invoice.paid", {"invoice": "ac_1"}, tenant="acme")

    page.click("text=Back to the endpoint")
    page.wait_for_selector("#endpoint-validation")
    assert "Refused" in page.inner_text("#endpoint-validation")
    assert "without WebHook-Allowed-Origin" in page.inner_text("#endpoint-validation-reason")
    assert page.is_visible("#validation-help")
    shot(page, "endpoint-consent-refused")
    assert receiver.requests == []

    receiver.options_handler = consent()
    page.click("#ask-consent")
    page.wait_for_selector("text=We asked your endpoint for its consent again")
    [request] = receiver.wait_for(1)
    assert request.headers["X-Webhook-Id"] == str(event.id)
    assert request.headers["WebHook-Request-Origin"] == ORIGIN
    wait_until(
        lambda: Delivery.objects.filter(event=event, status=DeliveryStatus.SUCCEEDED).exists(),
        what="the waiting delivery sent",
    )
    page.reload()
    assert "Validated" in page.inner_text("#endpoint-validation")
    assert not page.is_visible("#validation-help")
