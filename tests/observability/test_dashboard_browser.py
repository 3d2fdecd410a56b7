"""The dashboard in a real browser (headless Debian Chromium through Playwright): a staff
user logs in, opens the dashboard from the admin index, and the charts are drawn with data.

A screenshot is saved to var/screenshots/dashboard.png (the test's artifact); with
UPDATE_DOCS_SCREENSHOTS=1 it is also copied to docs/screenshots/ for the documentation.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from .dashboard_data import seed_dashboard

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
ARTIFACT = ROOT / "var" / "screenshots" / "dashboard.png"
DOCS_COPY = ROOT / "docs" / "screenshots" / "dashboard.png"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed"),
    pytest.mark.django_db(transaction=True),
]


def test_dashboard_renders_with_data_in_a_real_browser(live_server: object) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    seed_dashboard()
    User.objects.create_superuser("ops", "ops@example.com", "browser-test-password")
    base = str(live_server)
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory() as profile, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1280, "height": 1400},
        )
        try:
            page = browser.new_page()
            page.goto(f"{base}/admin/login/?next=/admin/")
            page.fill("#id_username", "ops")
            page.fill("#id_password", "browser-test-password")
            page.click("input[type=submit]")
            page.click("#webhooks-dashboard-link a")
            page.wait_for_selector("#chart-throughput svg")

            assert page.title().startswith("Webhooks dashboard")
            assert page.locator("svg.chart").count() == 7
            assert page.locator("#chart-throughput rect.bar").count() > 10
            assert page.locator("#chart-success_rate polyline.series").count() >= 1
            assert page.locator("#chart-latency polyline.series").count() == 3
            assert "flaky.example.org" in page.inner_text("#chart-top_failing")
            box = page.locator("#chart-throughput svg").bounding_box()
            assert box is not None
            assert box["width"] > 300
            page.screenshot(path=str(ARTIFACT), full_page=True)

            page.click("text=last 24 hours")
            page.wait_for_selector("a.current:has-text('last 24 hours')")
            assert page.locator("svg.chart").count() == 7
        finally:
            browser.close()

    assert ARTIFACT.stat().st_size > 10_000
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1":
        DOCS_COPY.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ARTIFACT, DOCS_COPY)
