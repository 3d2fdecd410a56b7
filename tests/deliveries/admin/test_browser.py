"""The console in a real headless Chromium against the live admin, worker and receiver.

Uses Debian's `chromium` (never a downloaded browser build); skipped when it is missing.
Screenshots land in var/screenshots/; with UPDATE_DOCS_SCREENSHOTS=1 the ones the admin
console page shows (docs/operations/admin.md) are also copied to docs/screenshots/.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from deliveries import services
from deliveries.models import Delivery, DeliveryStatus, EndpointState, Replay, ReplayStatus
from tests.browser import require_chromium
from tests.conftest import wait_until
from tests.deliveries.admin.browser import run_action, shot
from tests.deliveries.admin.helpers import event_at, hours_ago
from tests.fixtures import FAST_POLICY
from tests.receiver import Receiver

require_chromium()

pytestmark = pytest.mark.django_db(transaction=True)


def local(when: Any) -> str:
    return timezone.localtime(when).strftime("%Y-%m-%dT%H:%M")


def test_operator_console_in_a_real_browser(
    celery_worker: object, receiver: Receiver, live_server: Any, page: Any
) -> None:
    User.objects.create_superuser("operator", "op@example.com", "correct horse")
    endpoint, _ = services.endpoint_create(
        url=receiver.url, event_types=["invoice.*"], description="billing", **FAST_POLICY
    )
    receiver.script(401)
    event = services.emit("invoice.paid", {"invoice": "in_1"})
    wait_until(
        lambda: Delivery.objects.filter(event=event, status=DeliveryStatus.DEAD_LETTERED).exists(),
        what="dead-lettered",
    )
    dead = Delivery.objects.get(event=event)
    past = [event_at("invoice.paid", hours_ago(h), invoice=f"in_{h}") for h in (1.5, 1.2)]

    # Log in.
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "correct horse")
    page.click('input[type="submit"]')
    page.wait_for_selector("#site-name")

    # The dead-letter queue, and "retry now".
    page.goto(f"{live_server.url}/admin/deliveries/deadletter/")
    assert "HTTP 401" in page.content()
    shot(page, "dead-letter-queue")
    run_action(page, "retry_now", str(dead.pk))
    page.wait_for_selector("text=1 delivery queued again.")
    receiver.wait_for(2)
    wait_until(
        lambda: Delivery.objects.filter(pk=dead.pk, status=DeliveryStatus.SUCCEEDED).exists(),
        what="retried delivery succeeded",
    )

    # The event's timeline shows both attempts.
    page.goto(f"{live_server.url}/admin/deliveries/event/{event.pk}/change/")
    assert page.locator("tr.attempt").count() == 2
    shot(page, "event-timeline")

    # Replay console: preview, then confirm.
    page.goto(f"{live_server.url}/admin/deliveries/replay/console/")
    page.fill("#id_since", local(hours_ago(2)))
    page.fill("#id_until", local(hours_ago(1)))
    page.fill("#id_event_types", "invoice.*")
    page.click('input[name="preview"]')
    summary = page.wait_for_selector("#preview-summary")
    assert summary.inner_text() == "2 deliveries"
    assert not Replay.objects.exists()
    shot(page, "replay-preview")
    page.click('input[name="confirm"]')
    page.wait_for_selector("text=started: 2 deliveries")
    requests = receiver.wait_for(4)
    replayed = [r for r in requests if r.headers["X-Webhook-Replay"] == "true"]
    assert {r.headers["X-Webhook-Id"] for r in replayed} == {str(e.pk) for e in past}
    wait_until(lambda: Replay.objects.filter(status=ReplayStatus.DONE).exists(), what="replay done")
    page.reload()
    shot(page, "replay-progress")

    # Suspend, then resume delivering the held backlog.
    page.goto(f"{live_server.url}/admin/deliveries/endpoint/")
    run_action(page, "suspend_endpoints", str(endpoint.pk))
    page.wait_for_selector("text=1 endpoint suspended.")
    endpoint.refresh_from_db()
    assert endpoint.state == EndpointState.SUSPENDED
    held = services.emit("invoice.paid", {"invoice": "in_held"})
    wait_until(
        lambda: Delivery.objects.filter(event=held, status=DeliveryStatus.HELD).exists(),
        what="held while suspended",
    )
    run_action(page, "resume_endpoints", str(endpoint.pk))
    page.wait_for_selector("text=1 held delivery")
    page.check('input[name="backlog"][value="deliver"]')
    shot(page, "resume-choice")
    page.click('input[type="submit"][value="Resume"]')
    page.wait_for_selector("text=1 endpoint(s) resumed; 1 held deliveries delivered.")
    wait_until(
        lambda: Delivery.objects.filter(event=held, status=DeliveryStatus.SUCCEEDED).exists(),
        what="backlog delivered",
    )
    page.reload()
    shot(page, "endpoints")
    endpoint.refresh_from_db()
    assert endpoint.state == EndpointState.ACTIVE
