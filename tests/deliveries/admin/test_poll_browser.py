"""A polling endpoint in the operator console, in a real headless Chromium against the
live admin: its page (poll URL, consumer groups with lag, recent polls) and a rotation of
its key shown once on the secrets page.

Uses Debian's `chromium`; skipped when it is missing. Screenshots land in
var/screenshots/; with UPDATE_DOCS_SCREENSHOTS=1 the documented one also in
docs/screenshots/ (tests/deliveries/admin/browser.py).
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from deliveries.endpoints.principals import OPERATOR
from deliveries.polling import keys
from deliveries.polling import services as polling
from tests.browser import SCREENSHOTS, require_chromium
from tests.deliveries.admin.browser import shot
from tests.deliveries.helpers import available_rows

require_chromium()

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_operator_looks_at_a_polling_endpoint_in_a_real_browser(
    live_server: Any, page: Any
) -> None:
    User.objects.create_superuser("operator", "op@example.com", "correct horse")
    endpoint = polling.endpoint_create_with_key(
        principal=OPERATOR, url="", mode="poll", event_types=["invoice.*"], description="ledger"
    ).endpoint
    available_rows(endpoint, 6)
    for name, take in (("ledger-sync", 4), ("audit-export", 1)):
        read = polling.group_read(endpoint=endpoint, name=name, limit=take)
        polling.group_commit(endpoint=endpoint, name=name, iterator=read.iterator)
    polling.group_read(endpoint=endpoint, name="audit-export", limit=2)  # leased
    polling.feed_read(endpoint=endpoint, limit=3)

    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "correct horse")
    page.click('input[type="submit"]')
    page.wait_for_selector("#site-name")

    page.goto(f"{live_server.url}/admin/deliveries/endpoint/")
    assert page.locator("text=(polling endpoint)").count() == 1
    page.click("text=(polling endpoint)")
    page.wait_for_selector("#poll-consumers")
    assert f"/api/v1/poll/{endpoint.pk}" in page.inner_text("#poll-url")
    lags = page.locator("#poll-consumers td.lag").all_inner_texts()
    assert sorted(lags) == ["2", "5"]
    assert page.locator("#recent-polls tr.poll").count() == 4
    assert page.locator('input[name="url"]').count() == 0
    shot(page, "poll-endpoint")

    page.click("text=Rotate the poll key…")
    page.click('input[value="Issue a new key"]')
    page.wait_for_selector("code.secret")
    key = page.inner_text("code.secret").strip()
    assert keys.endpoint_of_key(key) == endpoint
    page.screenshot(path=str(SCREENSHOTS / "poll-key-shown.png"), full_page=True)
    page.goto(f"{live_server.url}/admin/deliveries/pollrecord/")
    assert page.locator("#result_list tbody tr").count() == 4
