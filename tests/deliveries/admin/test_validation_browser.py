"""The CloudEvents handshake in the admin, in a real headless Chromium: the endpoint list
shows the validation state, the change page the reason, and an action asks again."""

from typing import Any

import pytest
from django.contrib.auth.models import User

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus, Endpoint, ValidationState
from tests.browser import require_chromium
from tests.conftest import wait_until
from tests.deliveries.admin.browser import run_action, shot
from tests.deliveries.helpers import ORIGIN, consent
from tests.fixtures import FAST_POLICY
from tests.receiver import Receiver

require_chromium()

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_operator_sees_the_state_and_asks_again(
    celery_worker: object, receiver: Receiver, live_server: Any, page: Any, settings: Any
) -> None:
    settings.WEBHOOKS_VALIDATION_ORIGIN = ORIGIN
    receiver.options_handler = consent(allowed_origin="not-us.example")
    User.objects.create_superuser("operator", "op@example.com", "correct horse")
    endpoint, _ = services.endpoint_create(
        url=receiver.url,
        event_types=["*"],
        description="needs consent",
        validation="cloudevents",
        **FAST_POLICY,
    )
    wait_until(
        lambda: Endpoint.objects.get(pk=endpoint.pk).validation_state == ValidationState.REFUSED,
        what="refused",
    )
    event = services.emit("invoice.paid", {"invoice": "in_1"})

    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "correct horse")
    page.click('input[type="submit"]')
    page.wait_for_selector("#site-name")

    page.goto(f"{live_server.url}/admin/deliveries/endpoint/{endpoint.pk}/change/")
    assert "not-us.example" in page.inner_text(".field-validation_reason")
    assert "Refused" in page.inner_text(".field-validation_state")
    page.goto(f"{live_server.url}/admin/deliveries/endpoint/")
    assert page.inner_text("td.field-consent") == "refused"
    shot(page, "endpoint-validation-refused")
    assert receiver.requests == []

    receiver.options_handler = consent()
    run_action(page, "request_validation", str(endpoint.pk))
    page.wait_for_selector("text=Handshake sent to 1 endpoint")
    [request] = receiver.wait_for(1)
    assert request.headers["X-Webhook-Id"] == str(event.id)
    wait_until(
        lambda: Delivery.objects.filter(event=event, status=DeliveryStatus.SUCCEEDED).exists(),
        what="the waiting delivery sent",
    )
    page.reload()
    assert page.inner_text("td.field-consent") == "validated"
