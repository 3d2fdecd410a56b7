"""What a view-only staff member sees of an endpoint with a credential in its URL and in
its OAuth2 token URL, in a real headless Chromium (Debian's `chromium`; skipped when it is
missing). The screenshots land in var/screenshots/view-only-*.png."""

from typing import Any

import pytest
from django.utils import timezone

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus
from tests.browser import require_chromium
from tests.deliveries.admin.browser import shot
from tests.deliveries.admin.helpers import event_at, hours_ago, staff_in

require_chromium()

pytestmark = pytest.mark.django_db(transaction=True)

SECRETS = ("qu3ry-s3cret", "t0ken-url-s3cret")


def test_a_view_only_user_reads_every_url_masked(live_server: Any, page: Any) -> None:
    endpoint, _ = services.endpoint_create(
        url="https://1.1.1.1/hook?token=qu3ry-s3cret&team=billing",
        event_types=["invoice.*"],
        description="billing",
        auth={
            "type": "oauth2_client_credentials",
            "token_url": "https://1.1.1.1/oauth/token?api_key=t0ken-url-s3cret",
            "client_id": "webhooks-sender",
            "client_secret": "client-s3cret",
        },
    )
    delivery = Delivery.objects.create(
        event=event_at("invoice.paid", hours_ago(1)),
        endpoint=endpoint,
        status=DeliveryStatus.DEAD_LETTERED,
        attempts=1,
        last_error="HTTP 500",
        completed_at=timezone.now(),
    )
    viewer = staff_in("viewers")
    viewer.set_password("correct horse")
    viewer.save()
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "viewers")
    page.fill("#id_password", "correct horse")
    page.click('input[type="submit"]')
    page.wait_for_selector("#site-name")

    for name, path in (
        ("view-only-endpoints", "endpoint/"),
        ("view-only-endpoint", f"endpoint/{endpoint.pk}/change/"),
        ("view-only-delivery", f"delivery/{delivery.pk}/change/"),
    ):
        page.goto(f"{live_server.url}/admin/deliveries/{path}")
        text = page.inner_text("body")
        for secret in SECRETS:
            assert secret not in page.content(), (path, secret)
        assert "https://1.1.1.1/hook?token=***&team=***" in text, path
        shot(page, name)
    page.goto(f"{live_server.url}/admin/deliveries/endpoint/{endpoint.pk}/change/")
    assert "https://1.1.1.1/oauth/token?api_key=***" in page.inner_text("body")
