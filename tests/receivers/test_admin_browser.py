"""The source's delete page in a real headless Chromium (Debian's `chromium`; skipped when it
is missing): the counts, the box for unprocessed events, and the deletion. The screenshot
lands in var/screenshots/source-delete.png."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from receivers import services
from receivers.models import InboxEvent, InboxStatus, Source

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def admin_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
            viewport={"width": 1400, "height": 800},
        )
        context.set_default_timeout(20_000)
        try:
            yield context.new_page()
        finally:
            context.close()


def test_deleting_a_source_with_unprocessed_events_in_a_browser(
    live_server: Any, admin_page: Any
) -> None:
    User.objects.create_superuser("operator", "op@example.com", "correct horse")
    source, _ = services.source_create(slug="stripe-live", scheme="stripe", secret="whsec_abc")
    now = timezone.now()
    for number, status in enumerate([InboxStatus.PROCESSED, InboxStatus.FAILED]):
        InboxEvent.objects.create(
            source=source,
            event_id=f"evt_{number}",
            type="invoice.paid",
            status=status,
            payload={},
            received_at=now,
        )

    admin_page.goto(f"{live_server.url}/admin/login/")
    admin_page.fill("#id_username", "operator")
    admin_page.fill("#id_password", "correct horse")
    admin_page.click('input[type="submit"]')
    admin_page.wait_for_selector("#site-name")

    admin_page.goto(f"{live_server.url}/admin/receivers/source/{source.pk}/delete/")
    listed = admin_page.inner_text("#deleted-objects")
    assert "2 inbox event(s), 1 of them not processed" in listed
    assert "[" not in listed  # a nested list, not a Python repr
    admin_page.screenshot(path=str(SCREENSHOTS / "source-delete.png"), full_page=True)

    # Without the box: refused, nothing deleted.
    admin_page.click('input[type="submit"][value^="Yes"]')
    admin_page.wait_for_selector("text=not yet processed")
    assert Source.objects.filter(pk=source.pk).exists()

    admin_page.check("#id_force")
    admin_page.click('input[type="submit"][value^="Yes"]')
    admin_page.wait_for_selector("text=was deleted successfully")
    assert not Source.objects.filter(pk=source.pk).exists()
    assert not InboxEvent.objects.exists()
