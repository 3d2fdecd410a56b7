"""A tenant's polling endpoint in a real headless Chromium against the live server: added
from the portal, read by a consumer over HTTP with the key the page showed once, then its
page (consumers, lag, polls) and a rotation of its key.

Uses Debian's `chromium` (never a downloaded browser build); skipped when it is missing.
Screenshots land in var/screenshots/portal-*.png; with UPDATE_DOCS_SCREENSHOTS=1 the page
of the endpoint is also copied to docs/screenshots/.
"""

from typing import Any

import pytest
import requests

from deliveries import services
from deliveries.models import Endpoint
from tests.browser import SCREENSHOTS, require_chromium
from tests.deliveries.helpers import available_rows
from tests.deliveries.portal.browser import new_page, shot

require_chromium()

pytestmark = pytest.mark.django_db(transaction=True)


def look(page: Any, name: str) -> None:
    """A screenshot for a person to look at (not in the documentation)."""
    page.screenshot(path=str(SCREENSHOTS / f"portal-{name}.png"), full_page=True)


def test_a_tenant_runs_a_polling_endpoint_in_a_real_browser(live_server: Any, browser: Any) -> None:
    page = new_page(browser)
    _, token = services.portal_link_create(tenant="acme")
    page.goto(f"{live_server.url}/portal/open/{token}")
    page.click("button:has-text('Open the portal')")
    page.wait_for_selector("text=No endpoint yet")

    # Adds a polling endpoint: choosing "poll" hides what only a push endpoint has.
    page.click("text=Add an endpoint")
    assert page.is_visible("#id_url")
    page.check('input[name="mode"][value="poll"]')
    assert not page.is_visible("#id_url")
    assert not page.is_visible("#id_auth_type")
    page.fill("#id_description", "warehouse (behind the firewall)")
    page.check('input[name="event_types"][value="invoice.paid"]')
    look(page, "add-poll-endpoint")
    page.click("button:has-text('Add the endpoint')")
    page.wait_for_selector("text=Your new polling endpoint")
    key = page.inner_text("#poll-key").strip()
    assert key.startswith("whpoll_")
    endpoint = Endpoint.objects.get(tenant="acme")
    poll_url = f"{live_server.url}/api/v1/poll/{endpoint.pk}"
    assert poll_url in page.content()

    # Its consumer reads with that key over HTTP: a group commits two, an iterator reads.
    available_rows(endpoint, 5)
    auth = {"Authorization": f"Bearer {key}"}
    read = requests.get(f"{poll_url}/consumers/billing?limit=2", headers=auth, timeout=10)
    assert read.status_code == 200, read.text
    assert len(read.json()["data"]) == 2
    committed = requests.post(
        f"{poll_url}/consumers/billing/commit",
        json={"iterator": read.json()["iterator"]},
        headers=auth,
        timeout=10,
    )
    assert committed.status_code == 200, committed.text
    leased = requests.get(f"{poll_url}/consumers/billing?limit=1", headers=auth, timeout=10)
    assert len(leased.json()["data"]) == 1
    assert len(requests.get(poll_url, headers=auth, timeout=10).json()["data"]) == 5

    page.click("text=Back to the endpoint")
    page.wait_for_selector("#consumers")
    assert page.inner_text("#poll-url") == poll_url
    row = page.inner_text("tr.consumer")
    assert "billing" in row
    assert "3 messages" in row
    assert page.locator("tr.poll").count() == 3
    assert key not in page.content()
    shot(page, "poll-endpoint")

    # Rotates the key: confirmed, shown once; the old one stops at once.
    page.click("#poll-key-action")
    page.click("button:has-text('Rotate the poll key')")
    page.wait_for_selector("text=Your new poll key")
    rotated = page.inner_text("#poll-key").strip()
    assert rotated != key
    assert requests.get(poll_url, headers=auth, timeout=10).status_code == 401
    fresh = {"Authorization": f"Bearer {rotated}"}
    assert requests.get(poll_url, headers=fresh, timeout=10).status_code == 200
    look(page, "poll-key")
