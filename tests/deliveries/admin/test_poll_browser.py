"""A polling endpoint in the operator console, in a real headless Chromium against the
live admin: its page (poll URL, consumer groups with lag, recent polls) and a rotation of
its key shown once on the secrets page.

Uses Debian's `chromium`; skipped when it is missing. Screenshots land in
var/screenshots/; with UPDATE_DOCS_SCREENSHOTS=1 the documented ones also in
docs/screenshots/.
"""

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from deliveries.endpoints.principals import OPERATOR
from deliveries.models import Delivery, DeliveryStatus, Endpoint, Event
from deliveries.polling import feed, keys, positions
from deliveries.polling import services as polling
from tests.conftest import wait_until

ROOT = Path(__file__).resolve().parents[3]
SCREENSHOTS = ROOT / "var" / "screenshots"
DOCS_SCREENSHOTS = ROOT / "docs" / "screenshots"
#: The ones the documentation shows (the others are for looking at a run).
DOCUMENTED = {"poll-endpoint"}
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            context = browser.new_context(viewport={"width": 1600, "height": 900})
            context.set_default_timeout(20_000)
            yield context.new_page()
        finally:
            browser.close()


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
    if name in DOCUMENTED and os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1":
        shutil.copyfile(SCREENSHOTS / f"{name}.png", DOCS_SCREENSHOTS / f"{name}.png")


def events_for(endpoint: Endpoint, count: int) -> None:
    for n in range(count):
        event = Event.objects.create(
            type="invoice.paid",
            occurred_at=timezone.now(),
            data={"invoice": f"in_{n}"},
            fanned_out_at=timezone.now(),
        )
        Delivery.objects.create(event=event, endpoint=endpoint, status=DeliveryStatus.AVAILABLE)
    wait_until(
        lambda: len(feed.rows_after(endpoint.pk, positions.START, 250)) >= count,
        what="the rows in the feed",
    )


def test_an_operator_looks_at_a_polling_endpoint_in_a_real_browser(
    live_server: Any, page: Any
) -> None:
    User.objects.create_superuser("operator", "op@example.com", "correct horse")
    endpoint = polling.endpoint_create_with_key(
        principal=OPERATOR, url="", mode="poll", event_types=["invoice.*"], description="ledger"
    ).endpoint
    events_for(endpoint, 6)
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
    shot(page, "poll-key-shown")
    page.goto(f"{live_server.url}/admin/deliveries/pollrecord/")
    assert page.locator("#result_list tbody tr").count() == 4
