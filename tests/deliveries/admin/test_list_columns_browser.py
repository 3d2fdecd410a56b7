"""The deliveries list and the dead-letter queue show what an operator acts on (status,
endpoint, attempts, next try) within a 1,280-pixel window, in Debian's Chromium.

Long event types and endpoint URLs are what pushed the status off the screen; the test
makes both. Screenshots land in var/screenshots/ (list-deliveries-1280.png,
list-dead-letters-1280.png).
"""

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from deliveries.models import Delivery, DeliveryStatus, Endpoint
from tests.deliveries.admin.helpers import event_at, hours_ago

CHROMIUM = "/usr/bin/chromium"
WIDTH = 1280
SCREENSHOTS = Path(__file__).resolve().parents[3] / "var" / "screenshots"

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.django_db(transaction=True)

LONG_URL = "https://hooks.customer-with-a-long-name.example.com/webhooks/v2/inbound/orders/eu"
LONG_TYPE = "commerce.storefront.order.fulfilment.partially_shipped"


def rows() -> None:
    endpoint = Endpoint.objects.create(url=LONG_URL, event_types=["*"], description="eu orders")
    for n, status in enumerate([DeliveryStatus.PENDING, DeliveryStatus.DEAD_LETTERED] * 3):
        event = event_at(LONG_TYPE, hours_ago(1), n=n)
        Delivery.objects.create(
            event=event,
            endpoint=endpoint,
            status=status,
            next_attempt_at=timezone.now() if status == DeliveryStatus.PENDING else None,
            last_status_code=503,
            last_error="HTTP 503: Service Unavailable, the upstream gateway timed out " * 3,
        )


@pytest.mark.parametrize(
    ("path", "name", "columns"),
    [
        ("deliveries/delivery/", "list-deliveries", ["status", "endpoint_url", "attempts", "next_attempt_at"]),  # noqa: E501
        ("deliveries/deadletter/", "list-dead-letters", ["status", "endpoint_url", "attempts", "last_status_code"]),  # noqa: E501
    ],
)  # fmt: skip
def test_the_columns_an_operator_acts_on_fit_1280_pixels(
    live_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, name: str,
    columns: list[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    User.objects.create_superuser("operator", "op@example.com", "correct horse")
    rows()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 800})
            page.goto(f"{live_server.url}/admin/login/")
            page.fill("#id_username", "operator")
            page.fill("#id_password", "correct horse")
            page.click('input[type="submit"]')
            page.wait_for_selector("#site-name")
            page.goto(f"{live_server.url}/admin/{path}")
            page.wait_for_selector("#result_list")
            page.screenshot(path=str(SCREENSHOTS / f"{name}-{WIDTH}.png"))
            # The list scrolls inside its own box, beside the filters: a column past that
            # box's right edge is off the screen until the operator scrolls sideways.
            visible = page.locator("#changelist .results").bounding_box()
            assert visible is not None
            assert visible["x"] + visible["width"] <= WIDTH
            for column in columns:
                box = page.locator(f"#result_list th.column-{column}").bounding_box()
                assert box is not None, column
                assert box["x"] + box["width"] <= visible["x"] + visible["width"], (column, box)
        finally:
            browser.close()
