"""The portal in a real headless Chromium against the live server, worker and receiver.

Uses Debian's `chromium` (never a downloaded browser build); skipped when it is missing.
Screenshots land in var/screenshots/portal-*.png; with UPDATE_DOCS_SCREENSHOTS=1 they are
also copied to docs/screenshots/ (the documentation shows them), so a test run leaves the
checkout as it was.
"""

from typing import Any

import pytest
import requests

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus, Endpoint, PortalLink
from tests.browser import require_chromium
from tests.conftest import wait_until
from tests.deliveries.portal.browser import new_page, portal_link, shot
from tests.fixtures import FAST_POLICY
from tests.receiver import Receiver

require_chromium()

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_tenant_manages_its_webhooks_in_a_real_browser(
    celery_worker: object, receiver: Receiver, live_server: Any, browser: Any, settings: Any
) -> None:
    # The receiver is on loopback: tenants may reach it only when this setting says so
    # (WEBHOOKS_ALLOWED_NETWORKS is for operators' endpoints, never a tenant's).
    settings.WEBHOOKS_PORTAL_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1"]
    # Another tenant, with an endpoint and a delivery the first must never see.
    theirs, _ = services.endpoint_create(
        url=receiver.url + "/globex",
        event_types=["*"],
        tenant="globex",
        description="globex billing",
        **FAST_POLICY,
    )
    their_event = services.emit("invoice.paid", {"invoice": "gx_1"}, tenant="globex")
    receiver.wait_for(1)

    # The tenant opens its link (one button), and the token leaves the address bar.
    link = portal_link(live_server, "acme")
    page = new_page(browser)
    page.goto(link)
    page.click("button:has-text('Open the portal')")
    page.wait_for_url(f"{live_server.url}/portal/")
    page.wait_for_selector("text=No endpoint yet")

    # Adds an endpoint, picking event types from the catalogue.
    page.click("text=Add an endpoint")
    page.fill("#id_url", receiver.url + "/acme")
    page.fill("#id_description", "acme orders")
    page.check('input[name="event_types"][value="invoice.paid"]')
    page.check('input[name="event_types"][value="order.created"]')
    page.click("summary:has-text('Example of endpoint.suspended')")
    shot(page, "add-endpoint")
    page.click("button:has-text('Add the endpoint')")
    page.wait_for_selector("text=Your new signing secret")
    ours = Endpoint.objects.get(tenant="acme")
    assert ours.secrets.get().value in page.inner_text(".secret")
    page.click("text=Back to the endpoint")
    page.wait_for_selector("text=Send a test event")
    shot(page, "endpoint")
    Endpoint.objects.filter(pk=ours.pk).update(**FAST_POLICY)

    # Sends a test event and sees its attempt.
    page.click("button:has-text('Send a test event')")
    page.wait_for_selector("text=Test event sent.")
    requests = receiver.wait_for(2)
    assert requests[-1].path == "/hook/acme"
    assert requests[-1].headers["X-Webhook-Event"] == "webhook.test"
    test_delivery = Delivery.objects.get(endpoint=ours)
    wait_until(
        lambda: Delivery.objects.filter(
            pk=test_delivery.pk, status=DeliveryStatus.SUCCEEDED
        ).exists(),
        what="test event delivered",
    )
    page.reload()
    assert page.locator("tr.attempt").count() == 1
    assert "200" in page.inner_text("tr.attempt")
    shot(page, "delivery")

    # A delivery that fails for good, then a retry from the log.
    receiver.script(401)
    failed_event = services.emit("invoice.paid", {"invoice": "ac_1"}, tenant="acme")
    wait_until(
        lambda: Delivery.objects.filter(
            event=failed_event, status=DeliveryStatus.DEAD_LETTERED
        ).exists(),
        what="dead-lettered",
    )
    # Recover: a preview of how many would be sent again, and nothing sent yet.
    page.click("nav >> text=Recover")
    page.fill("#id_since", "2020-01-01T00:00")
    page.click("button:has-text('Count the failed deliveries')")
    page.wait_for_selector("#recover-preview")
    assert "1 failed delivery would" in page.inner_text("#recover-preview")
    shot(page, "recover")
    assert Delivery.objects.get(event=failed_event).status == DeliveryStatus.DEAD_LETTERED

    page.click("nav >> text=Delivery log")
    page.wait_for_selector("#result-count")
    assert page.inner_text("#result-count") == "2 deliveries"
    body = page.content()
    assert "globex" not in body
    assert str(theirs.pk) not in body
    shot(page, "delivery-log")
    page.click("tr.delivery:has-text('Dead-lettered') >> a")
    page.wait_for_selector("tr.attempt:has-text('401')")
    page.click("button:has-text('Retry now')")
    page.wait_for_selector("text=Delivery queued again.")
    wait_until(
        lambda: Delivery.objects.filter(
            event=failed_event, status=DeliveryStatus.SUCCEEDED
        ).exists(),
        what="retried delivery succeeded",
    )
    page.reload()
    assert page.locator("tr.attempt").count() == 2
    assert page.inner_text("#delivery-status") == "Succeeded"

    # The other tenant's objects are not reachable by id either.
    their_delivery = Delivery.objects.get(event=their_event)
    for path in (f"endpoints/{theirs.pk}/", f"deliveries/{their_delivery.pk}/"):
        response = page.goto(f"{live_server.url}/portal/{path}")
        assert response.status == 404, path

    page.goto(f"{live_server.url}/portal/event-types")
    page.click(".toc >> text=shop.order.created")
    shot(page, "event-types", full_page=False)
    page.goto(f"{live_server.url}/portal/")
    shot(page, "endpoints")

    # The link was used: opening it again (even in another browser) is refused.
    other = new_page(browser)
    response = other.goto(link)
    assert response.status == 403
    other.wait_for_selector("text=already used or has expired")
    shot(other, "link-refused")
    assert other.goto(f"{live_server.url}/portal/").status == 403

    # The second tenant, through its own link, sees only its own.
    second = new_page(browser)
    second.goto(portal_link(live_server, "globex"))
    second.click("button:has-text('Open the portal')")
    second.wait_for_selector("text=globex billing")
    assert "acme" not in second.content()
    second.click("nav >> text=Delivery log")
    assert second.inner_text("#result-count") == "1 delivery"


def test_a_scanners_get_leaves_the_link_usable_and_the_button_works_without_javascript(
    live_server: Any, browser: Any
) -> None:
    """Link scanners GET links first; the person's click still opens the portal,
    with JavaScript off; a live session for another tenant is named before the switch."""
    link = portal_link(live_server, "acme")
    for _ in range(3):  # an e-mail scanner, a chat unfurler, a preview bot
        scanned = requests.get(link, timeout=10)
        assert scanned.status_code == 200
        assert "Open the portal" in scanned.text
    assert PortalLink.objects.get(tenant="acme").used_at is None

    context = browser.new_context(
        viewport={"width": 1280, "height": 800}, java_script_enabled=False
    )
    context.set_default_timeout(20_000)
    page = context.new_page()
    page.goto(link)
    assert page.locator("form[method=post] button").count() == 1
    assert page.locator("button").count() == 1
    shot(page, "open")
    page.click("button:has-text('Open the portal')")
    page.wait_for_url(f"{live_server.url}/portal/")
    page.wait_for_selector("text=No endpoint yet")
    assert PortalLink.objects.get(tenant="acme").used_at is not None

    # Somebody else's link, opened in the same browser: the page says whose session ends.
    theirs = portal_link(live_server, "globex")
    page.goto(theirs)
    warning = page.inner_text("[role=alert]")
    assert "signed in to the portal of acme" in warning
    assert "globex" in warning
    shot(page, "open-switch")
    assert page.goto(f"{live_server.url}/portal/").status == 200  # still acme's, until the click
    assert "acme" in page.inner_text("header")
    page.goto(theirs)
    page.click("button:has-text('Switch to globex')")
    page.wait_for_url(f"{live_server.url}/portal/")
    assert "globex" in page.inner_text("header")
    assert PortalLink.objects.get(tenant="acme").ended_at is not None
    context.close()
