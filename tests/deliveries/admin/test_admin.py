"""The operator console in the admin: permissions, audit, DLQ, stats, events.

Plain ``django_db`` tests through Django's test client; the ones that need a worker and a
real receiver are in test_console_pipeline.py.
"""

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from deliveries import services
from deliveries.models import (
    ApiToken,
    Attempt,
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointState,
    Event,
    Replay,
    hash_api_token,
)
from tests.deliveries.admin.helpers import (
    ADMIN,
    act,
    endpoint_form,
    event_at,
    hours_ago,
)
from tests.fixtures import new_endpoint

pytestmark = pytest.mark.django_db


def dead_letter(ep: Endpoint, type_: str = "invoice.paid") -> Delivery:
    event = event_at(type_, hours_ago(1))
    return Delivery.objects.create(
        event=event,
        endpoint=ep,
        status=DeliveryStatus.DEAD_LETTERED,
        attempts=3,
        last_status_code=500,
        last_error="HTTP 500",
        completed_at=timezone.now(),
    )


# --- permissions: viewers look, operators act -----------------------------------------------


def test_viewers_see_everything_but_cannot_act(viewer: Client) -> None:
    ep = new_endpoint()
    dead = dead_letter(ep)

    listing = viewer.get(f"{ADMIN}/endpoint/")
    assert listing.status_code == 200
    page = listing.content.decode()
    assert ep.url in page
    for action in ("suspend_endpoints", "resume_endpoints", "rotate_secret", "send_test_event"):
        assert f'value="{action}"' not in page
    assert viewer.get(f"{ADMIN}/deadletter/").status_code == 200
    assert viewer.get(f"{ADMIN}/event/{dead.event_id}/change/").status_code == 200

    act(viewer, "endpoint", "suspend_endpoints", [ep.pk])
    act(viewer, "endpoint", "send_test_event", [ep.pk])
    act(viewer, "deadletter", "retry_now", [dead.pk])
    act(viewer, "deadletter", "cancel", [dead.pk])
    ep.refresh_from_db()
    dead.refresh_from_db()
    assert ep.state == EndpointState.ACTIVE
    assert dead.status == DeliveryStatus.DEAD_LETTERED
    assert Event.objects.filter(type="webhook.test").count() == 0

    assert viewer.get(f"{ADMIN}/replay/console/").status_code == 403
    assert viewer.post(f"{ADMIN}/replay/console/", {"since": "2026-01-01T00:00"}).status_code == 403
    assert viewer.get(f"{ADMIN}/endpoint/{ep.pk}/reveal-secret/").status_code == 403
    assert (
        viewer.post(f"{ADMIN}/endpoint/{ep.pk}/change/", {"url": "https://x.example"}).status_code
        == 403
    )
    assert not LogEntry.objects.exists()


def test_operators_act_and_every_action_is_in_the_admin_log(operator: Client) -> None:
    ep = new_endpoint()
    dead = dead_letter(ep)

    act(operator, "endpoint", "suspend_endpoints", [ep.pk])
    ep.refresh_from_db()
    assert ep.state == EndpointState.SUSPENDED
    entry = LogEntry.objects.get()
    assert entry.user.username == "operators"
    assert entry.object_id == str(ep.pk)
    assert entry.get_change_message() == "Suspended the endpoint"

    response = act(
        operator, "endpoint", "resume_endpoints", [ep.pk], confirm="yes", backlog="cancel"
    )
    assert "1 endpoint(s) resumed" in response.content.decode()
    ep.refresh_from_db()
    assert ep.state == EndpointState.ACTIVE

    act(operator, "deadletter", "retry_now", [dead.pk])
    dead.refresh_from_db()
    assert dead.status == DeliveryStatus.PENDING
    messages = list(LogEntry.objects.order_by("pk").values_list("change_message", flat=True))
    assert messages == [
        "Suspended the endpoint",
        "Resumed the endpoint; held backlog cancelled",
        "Retried now (fresh retry cycle)",
    ]
    # Revealing a secret is a separate permission the operators group does not have.
    assert operator.get(f"{ADMIN}/endpoint/{ep.pk}/reveal-secret/").status_code == 403


def test_resume_asks_what_to_do_with_the_held_backlog(operator: Client) -> None:
    ep = new_endpoint()
    services.endpoint_suspend(endpoint_id=ep.pk, reason="test")
    event = event_at("invoice.paid", hours_ago(1))
    Delivery.objects.create(event=event, endpoint=ep, status=DeliveryStatus.HELD)

    page = act(operator, "endpoint", "resume_endpoints", [ep.pk]).content.decode()
    assert "1 held delivery" in page
    assert "Deliver the held backlog" in page
    assert "Cancel the held backlog" in page
    ep.refresh_from_db()
    assert ep.state == EndpointState.SUSPENDED  # nothing happens before the choice


def test_rotate_secret_shows_the_new_secret_once_and_logs_no_secret(operator: Client) -> None:
    ep = new_endpoint()
    form = act(operator, "endpoint", "rotate_secret", [ep.pk]).content.decode()
    assert 'name="grace_seconds"' in form
    response = act(
        operator, "endpoint", "rotate_secret", [ep.pk], confirm="yes", grace_seconds="60"
    )
    page = response.content.decode()
    assert ep.secrets.count() == 2
    newest = ep.secrets.order_by("-created_at", "-pk").first()
    assert newest is not None
    assert newest.value in page
    older = ep.secrets.exclude(pk=newest.pk).get()
    assert older.expires_at is not None
    assert older.expires_at - timezone.now() < timedelta(seconds=61)
    entry = LogEntry.objects.get()
    assert newest.value not in entry.change_message
    assert entry.get_change_message() == "Rotated the signing secret (grace 60 s)"
    # Not shown again on the endpoint's page.
    assert newest.value not in operator.get(f"{ADMIN}/endpoint/{ep.pk}/change/").content.decode()

    bad = act(operator, "endpoint", "rotate_secret", [ep.pk], confirm="yes", grace_seconds="-5")
    assert bad.status_code == 200
    assert ep.secrets.count() == 2


def test_reveal_secret_needs_its_permission_and_is_logged(superuser: Client) -> None:
    ep = new_endpoint()
    secret = ep.secrets.get().value
    confirm = superuser.get(f"{ADMIN}/endpoint/{ep.pk}/reveal-secret/")
    assert confirm.status_code == 200
    assert secret not in confirm.content.decode()  # a GET shows nothing yet
    shown = superuser.post(f"{ADMIN}/endpoint/{ep.pk}/reveal-secret/")
    assert secret in shown.content.decode()
    entry = LogEntry.objects.get()
    assert entry.get_change_message() == "Revealed the signing secrets"
    assert secret not in entry.change_message


# --- endpoint list: health figures without N+1 ------------------------------------------------


def _endpoint_with_history(n: int) -> Endpoint:
    ep = new_endpoint(f"https://r{n}.example.com/hook")
    now = timezone.now()
    for i, status in enumerate([200, 200, 500, None]):
        event = event_at("invoice.paid", hours_ago(1))
        delivery = Delivery.objects.create(
            event=event,
            endpoint=ep,
            status=DeliveryStatus.SUCCEEDED if status == 200 else DeliveryStatus.DEAD_LETTERED,
            attempts=1,
        )
        Attempt.objects.create(
            delivery=delivery,
            number=1,
            started_at=now - timedelta(minutes=i),
            duration_ms=5,
            response_status=status,
            error="" if status else "connection refused",
        )
    old = Delivery.objects.create(
        event=event_at("invoice.paid", hours_ago(48)), endpoint=ep, status=DeliveryStatus.PENDING
    )
    # An attempt older than 24 h does not count in the rate.
    Attempt.objects.create(
        delivery=old,
        number=1,
        started_at=now - timedelta(hours=30),
        duration_ms=5,
        response_status=500,
    )
    return ep


def test_endpoint_list_stats_without_n_plus_one(
    superuser: Client, django_assert_max_num_queries: Any
) -> None:
    for n in range(2):
        _endpoint_with_history(n)
    with CaptureQueriesContext(connection) as few:
        response = superuser.get(f"{ADMIN}/endpoint/")
    page = response.content.decode()
    assert "50% of 4" in page  # 2 of the 4 attempts in the last 24 h succeeded
    assert 'class="field-pending_deliveries">1<' in page
    assert "?endpoint__id__exact=" in page  # dead-lettered count links to the DLQ

    for n in range(2, 12):
        _endpoint_with_history(n)
    with django_assert_max_num_queries(len(few.captured_queries)):
        superuser.get(f"{ADMIN}/endpoint/")


# --- DLQ -----------------------------------------------------------------------------------


def test_dead_letter_queue_shows_dead_letters_by_default_with_filters(superuser: Client) -> None:
    a, b = new_endpoint("https://a.example.com/hook"), new_endpoint("https://b.example.com/hook")
    dead_a = dead_letter(a, "invoice.paid")
    dead_b = dead_letter(b, "order.created")
    ok = Delivery.objects.create(
        event=event_at("invoice.paid", hours_ago(1)), endpoint=a, status=DeliveryStatus.SUCCEEDED
    )

    def ids(query: str = "") -> set[int]:
        response = superuser.get(f"{ADMIN}/deadletter/{query}")
        assert response.status_code == 200
        return {row.pk for row in response.context["cl"].result_list}

    assert ids() == {dead_a.pk, dead_b.pk}
    assert ids(f"?endpoint__id__exact={b.pk}") == {dead_b.pk}
    assert ids("?event_type=invoice.paid") == {dead_a.pk}
    assert ids("?status=any") == {dead_a.pk, dead_b.pk, ok.pk}
    assert ids("?status=succeeded") == {ok.pk}
    since = (timezone.now() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert ids(f"?created_at__gte={since}") == set()
    assert superuser.get(f"{ADMIN}/deadletter/?created_at__gte=garbage").status_code in (200, 302)

    # The action works on what the page lists: nothing but dead letters by default.
    response = act(superuser, "deadletter", "cancel", [dead_a.pk, ok.pk])
    assert "1 delivery cancelled." in response.content.decode()
    response = act(superuser, "deadletter", "cancel", [dead_b.pk, ok.pk], query="?status=any")
    assert "1 delivery cancelled. 1 skipped" in response.content.decode()
    dead_a.refresh_from_db()
    assert dead_a.status == DeliveryStatus.CANCELLED
    assert ids() == set()


def test_retry_refuses_deliveries_of_a_suspended_endpoint(superuser: Client) -> None:
    ep = new_endpoint()
    dead = dead_letter(ep)
    services.endpoint_suspend(endpoint_id=ep.pk, reason="test")
    response = act(superuser, "deadletter", "retry_now", [dead.pk])
    assert "0 deliveries queued again. 1 skipped" in response.content.decode()


# --- events: search and timeline ------------------------------------------------------------


def test_events_search_by_id_type_and_time_and_show_the_attempt_timeline(
    superuser: Client,
) -> None:
    ep = new_endpoint()
    delivery = dead_letter(ep, "invoice.paid")
    Attempt.objects.create(
        delivery=delivery,
        number=1,
        started_at=timezone.now(),
        duration_ms=123.4,
        response_status=503,
        response_body="upstream unavailable",
    )
    other = event_at("order.created", hours_ago(30))

    def ids(query: str) -> set[Any]:
        response = superuser.get(f"{ADMIN}/event/{query}")
        assert response.status_code == 200
        return {row.pk for row in response.context["cl"].result_list}

    assert ids(f"?q={delivery.event_id}") == {delivery.event_id}
    assert ids("?q=order.created") == {other.pk}
    since = hours_ago(2).strftime("%Y-%m-%dT%H:%M")
    assert ids(f"?created_at__gte={since}") == {delivery.event_id}
    assert ids("?q=not-a-uuid") == set()

    page = superuser.get(f"{ADMIN}/event/{delivery.event_id}/change/").content.decode()
    assert "Dead-lettered" in page
    assert "503" in page
    assert "123 ms" in page
    assert "upstream unavailable" in page


# --- replay console -------------------------------------------------------------------------


def test_replay_console_previews_then_confirms(operator: Client) -> None:
    new_endpoint(event_types=["invoice.*"])
    for hours in (1.5, 1.0):
        event_at("invoice.paid", hours_ago(hours))
    form = {
        "since": hours_ago(2).strftime("%Y-%m-%dT%H:%M"),
        "until": hours_ago(0.5).strftime("%Y-%m-%dT%H:%M"),
        "event_types": "invoice.*",
    }
    preview = operator.post(f"{ADMIN}/replay/console/", {**form, "preview": "Preview"})
    assert preview.status_code == 200
    assert "2 deliveries" in preview.content.decode()
    assert not Replay.objects.exists()

    done = operator.post(f"{ADMIN}/replay/console/", {**form, "confirm": "Confirm"}, follow=True)
    replay = Replay.objects.get()
    assert f"Replay #{replay.pk} started" in done.content.decode()
    assert replay.expected_deliveries == 2
    assert replay.requested_by is not None
    assert replay.requested_by.username == "operators"
    assert LogEntry.objects.get().object_id == str(replay.pk)

    invalid = operator.post(
        f"{ADMIN}/replay/console/", {**form, "event_types": "in*valid", "preview": "Preview"}
    )
    assert invalid.status_code == 200
    assert "errorlist" in invalid.content.decode()
    backwards = operator.post(
        f"{ADMIN}/replay/console/",
        {**form, "since": form["until"], "until": form["since"], "preview": "Preview"},
    )
    assert "must be after since" in backwards.content.decode()


# --- the admin's forms go through the services; secrets on their own page ----------------


def test_admin_add_endpoint_creates_its_secret_and_pins_shown_once(superuser: Client) -> None:
    response = superuser.post(f"{ADMIN}/endpoint/add/", endpoint_form())
    assert response.status_code == 200, response.content.decode()[:3000]
    created = Endpoint.objects.get()
    secret = created.secrets.get()  # before the fix: no secret, every delivery dead-lettered
    page = response.content.decode()
    assert secret.value in page  # on its own page, once
    assert "no-store" in response["Cache-Control"]
    assert secret.value not in str(response.cookies.get("messages", ""))
    assert created.version_pins.get("invoice.paid", 0) >= 1
    assert (
        secret.value not in superuser.get(f"{ADMIN}/endpoint/{created.pk}/change/").content.decode()
    )


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"custom_headers": '{"Host": "internal.example"}'}, "set by the sender"),
        ({"custom_headers": '{"Transfer-Encoding": "chunked"}'}, "set by the sender"),
        ({"custom_headers": '{"X-A": "a\\r\\nX-Injected: 1"}'}, "line break"),
        ({"custom_headers": '{"X-Price": "price €5"}'}, "Latin-1"),
        ({"event_types": '["nothing.declared.here"]'}, "matches no declared event type"),
        ({"version_pins": '{"invoice.paid": 99}'}, "versions 1 to"),
        ({"url": "http://127.0.0.1:18291\\@example.com/x"}, "backslash"),
    ],
)
def test_admin_endpoint_forms_keep_the_services_rules(
    superuser: Client, overrides: dict[str, str], problem: str
) -> None:
    response = superuser.post(f"{ADMIN}/endpoint/add/", endpoint_form(**overrides))
    assert response.status_code == 200
    assert problem in response.content.decode()
    assert not Endpoint.objects.exists()

    ep = new_endpoint("https://kept.example.com/hook", custom_headers={"X-Tenant": "acme"})
    before = Endpoint.objects.values().get(pk=ep.pk)
    response = superuser.post(
        f"{ADMIN}/endpoint/{ep.pk}/change/",
        endpoint_form(
            **{"url": "https://kept.example.com/hook", "event_types": '["*"]', **overrides}
        ),
    )
    assert response.status_code == 200
    assert problem in response.content.decode()
    assert Endpoint.objects.values().get(pk=ep.pk) == before


def test_admin_change_endpoint_masks_credential_headers_and_keeps_them(
    superuser: Client, viewer: Client
) -> None:
    ep = new_endpoint(custom_headers={"X-Api-Key": "k-123", "X-Tenant": "acme"})
    change = superuser.get(f"{ADMIN}/endpoint/{ep.pk}/change/").content.decode()
    assert "k-123" not in change
    assert "&lt;redacted&gt;" in change
    assert "k-123" not in viewer.get(f"{ADMIN}/endpoint/{ep.pk}/change/").content.decode()

    # Saving the form as shown (masked value untouched) keeps the stored value.
    response = superuser.post(
        f"{ADMIN}/endpoint/{ep.pk}/change/",
        endpoint_form(
            url=ep.url,
            event_types='["*"]',
            description="renamed",
            custom_headers='{"X-Api-Key": "<redacted>", "X-Tenant": "acme"}',
            secret_headers="X-Api-Key",
        ),
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    ep.refresh_from_db()
    assert ep.description == "renamed"
    assert ep.custom_headers_plain() == {"X-Api-Key": "k-123", "X-Tenant": "acme"}
    assert "k-123" not in json.dumps(ep.secret_custom_headers)


def test_admin_api_token_is_shown_on_its_page_never_in_a_message(superuser: Client) -> None:
    response = superuser.post("/admin/webhooks_core/apitoken/add/", {"name": "billing"})
    assert response.status_code == 200
    token = ApiToken.objects.get()
    page = response.content.decode()
    shown = re.search(r'<code class="secret">([^<]+)</code>', page)
    assert shown is not None
    assert token.token_hash == hash_api_token(shown.group(1))
    assert shown.group(1) not in str(response.cookies.get("messages", ""))
    # Nothing left for the next page to show either.
    follow = superuser.get("/admin/webhooks_core/apitoken/")
    assert shown.group(1) not in follow.content.decode()


def test_admin_retry_now_leaves_a_succeeded_delivery_alone(superuser: Client) -> None:
    ep = new_endpoint()
    done = Delivery.objects.create(
        event=event_at("invoice.paid", hours_ago(1)),
        endpoint=ep,
        status=DeliveryStatus.SUCCEEDED,
        attempts=1,
        completed_at=timezone.now(),
    )
    response = act(superuser, "delivery", "retry_now", [done.pk])
    assert "1 skipped (already delivered: use a replay" in response.content.decode()
    done.refresh_from_db()
    assert (done.status, done.attempts_before_cycle) == (DeliveryStatus.SUCCEEDED, 0)


def test_endpoint_views_that_take_secrets_hide_them_from_error_reports(
    superuser: Client,
) -> None:
    ep = new_endpoint()
    response = superuser.post(f"{ADMIN}/endpoint/{ep.pk}/change/", endpoint_form(url=""))
    assert response.status_code == 200
    assert response.context["request"].sensitive_post_parameters == (
        "custom_headers",
        "oauth2_client_secret",
        "client_key",
    )
    revealed = superuser.post(f"{ADMIN}/endpoint/{ep.pk}/reveal-secret/")
    assert revealed.context["request"].sensitive_post_parameters == "__ALL__"
