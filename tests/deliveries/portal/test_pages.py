"""The portal's pages on the real stack: isolation between tenants, CSRF, and each page's
work done through the services (endpoints, secrets, test events, retries, recovery)."""

import copy
import re
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.utils import timezone
from pytest_django.fixtures import Settings

from deliveries.models import (
    Attempt,
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointState,
)
from deliveries.portal.views import PAGE_SIZE
from tests.conftest import wait_until
from tests.deliveries.portal.helpers import delivery_to, endpoint_of, text
from tests.fixtures import FAST_POLICY
from tests.receiver import Receiver

from .helpers import portal_client

pytestmark = pytest.mark.django_db(transaction=True)


def csrf_of(page: str) -> str:
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert match, "no CSRF token in the form"
    return match.group(1)


# --- isolation -------------------------------------------------------------------------


def test_another_tenants_objects_are_404_and_never_listed() -> None:
    ours = endpoint_of("acme", "https://acme.example.com/hook")
    theirs = endpoint_of("globex", "https://globex.example.com/hook")
    nobodys = endpoint_of(None, "https://plain.example.com/hook")
    our_delivery = delivery_to(ours)
    their_delivery = delivery_to(theirs)
    delivery_to(nobodys)
    client = portal_client("acme")

    for page in ("/portal/", "/portal/deliveries/", f"/portal/endpoints/{ours.pk}/"):
        body = text(client.get(page))
        assert "globex.example.com" not in body, page
        assert "plain.example.com" not in body, page
    assert "acme.example.com" in text(client.get("/portal/"))
    listed = text(client.get("/portal/deliveries/"))
    assert f"/portal/deliveries/{our_delivery.pk}/" in listed
    assert f"/portal/deliveries/{their_delivery.pk}/" not in listed

    for path in ("", "edit", "delete", "secret", "rotate"):
        assert client.get(f"/portal/endpoints/{theirs.pk}/{path}").status_code == 404, path
    for path in ("state", "delete", "secret", "rotate", "test"):
        response = client.post(f"/portal/endpoints/{theirs.pk}/{path}", {"state": "disabled"})
        assert response.status_code == 404, path
    assert client.get(f"/portal/deliveries/{their_delivery.pk}/").status_code == 404
    assert client.post(f"/portal/deliveries/{their_delivery.pk}/retry").status_code == 404
    # A filter naming their endpoint shows nothing of theirs either.
    filtered = text(client.get(f"/portal/deliveries/?endpoint={theirs.pk}"))
    assert f"/portal/deliveries/{their_delivery.pk}/" not in filtered

    theirs.refresh_from_db()
    assert theirs.state == EndpointState.ACTIVE
    assert Endpoint.objects.filter(pk=theirs.pk).exists()


def test_the_portal_never_shows_operator_only_data() -> None:
    ours = endpoint_of("acme")
    Endpoint.objects.filter(pk=ours.pk).update(
        circuit_state="open", consecutive_failures=7, owner_email="ops@example.com"
    )
    body = text(portal_client("acme").get(f"/portal/endpoints/{ours.pk}/"))
    for operator_only in ("circuit", "Circuit", "consecutive", "ops@example.com", "audit"):
        assert operator_only not in body


def test_every_form_needs_its_csrf_token() -> None:
    ours = endpoint_of("acme")
    delivery = delivery_to(ours)
    client = portal_client("acme", enforce_csrf_checks=True)
    posts = [
        ("/portal/endpoints/new", {"url": "https://x.example.com", "event_types": ["*"]}),
        (f"/portal/endpoints/{ours.pk}/state", {"state": "disabled"}),
        (f"/portal/endpoints/{ours.pk}/delete", {}),
        (f"/portal/endpoints/{ours.pk}/secret", {}),
        (f"/portal/endpoints/{ours.pk}/rotate", {"grace_seconds": "0"}),
        (f"/portal/endpoints/{ours.pk}/test", {}),
        (f"/portal/deliveries/{delivery.pk}/retry", {}),
        ("/portal/recover", {"since": "2026-01-01T00:00", "confirm": "1"}),
        ("/portal/sign-out", {}),
    ]
    for path, data in posts:
        assert client.post(path, data).status_code == 403, path
    ours.refresh_from_db()
    assert ours.state == EndpointState.ACTIVE
    assert Endpoint.objects.count() == 1
    assert ours.secrets.count() == 1
    # With the token the same form works.
    page = text(client.get(f"/portal/endpoints/{ours.pk}/"))
    response = client.post(
        f"/portal/endpoints/{ours.pk}/state",
        {"state": "disabled", "csrfmiddlewaretoken": csrf_of(page)},
    )
    assert response.status_code == 302


# --- endpoints -------------------------------------------------------------------------


def test_adding_an_endpoint_goes_through_the_service_with_the_tenant() -> None:
    client = portal_client("acme")
    form = text(client.get("/portal/endpoints/new"))
    # The catalogue's types, with descriptions and examples, are the choices.
    assert 'value="invoice.paid"' in form
    assert "Example of <code>endpoint.suspended</code>" in form
    assert 'value="webhook.test"' not in form

    response = client.post(
        "/portal/endpoints/new",
        {
            "url": "https://hooks.acme.example/in",
            "description": "billing",
            "event_types": ["invoice.paid"],
        },
    )
    assert response.status_code == 200
    endpoint = Endpoint.objects.get()
    assert (endpoint.tenant, endpoint.url, endpoint.event_types) == (
        "acme",
        "https://hooks.acme.example/in",
        ["invoice.paid"],
    )
    assert endpoint.secrets.get().value in text(response)
    assert "no-store" in response["Cache-Control"]


def test_the_services_rules_refuse_what_the_api_refuses() -> None:
    client = portal_client("acme")
    for url in (
        "https://10.0.0.1/hook",
        "https://intranet.example.com/hook",
        "ftp://x.example.com/",
    ):
        response = client.post("/portal/endpoints/new", {"url": url, "event_types": ["*"]})
        assert response.status_code == 200
        assert 'role="alert"' in text(response), url
    nothing = client.post("/portal/endpoints/new", {"url": "https://ok.example.com"})
    assert 'role="alert"' in text(nothing)
    assert not Endpoint.objects.exists()


def test_editing_an_endpoint_goes_through_endpoint_update() -> None:
    ours = endpoint_of("acme")
    client = portal_client("acme")
    assert 'value="https://hooks.example.com/x"' in text(
        client.get(f"/portal/endpoints/{ours.pk}/edit")
    )
    response = client.post(
        f"/portal/endpoints/{ours.pk}/edit",
        {
            "url": "https://new.example.com/hook",
            "description": "renamed",
            "event_types": ["invoice.paid"],
        },
    )
    assert response.status_code == 302
    ours.refresh_from_db()
    assert (ours.url, ours.description, ours.event_types, ours.tenant) == (
        "https://new.example.com/hook",
        "renamed",
        ["invoice.paid"],
        "acme",
    )
    refused = client.post(
        f"/portal/endpoints/{ours.pk}/edit", {"url": "https://10.0.0.1/x", "event_types": ["*"]}
    )
    assert 'role="alert"' in text(refused)
    ours.refresh_from_db()
    assert ours.url == "https://new.example.com/hook"


def test_disable_enable_and_delete() -> None:
    ours = endpoint_of("acme")
    pending = delivery_to(ours, DeliveryStatus.PENDING)
    client = portal_client("acme")
    client.post(f"/portal/endpoints/{ours.pk}/state", {"state": "disabled"})
    ours.refresh_from_db()
    assert ours.state == EndpointState.DISABLED
    pending.refresh_from_db()
    assert pending.status == DeliveryStatus.CANCELLED  # what endpoint_set_state does
    client.post(f"/portal/endpoints/{ours.pk}/state", {"state": "active"})
    ours.refresh_from_db()
    assert ours.state == EndpointState.ACTIVE

    confirm = text(client.get(f"/portal/endpoints/{ours.pk}/delete"))
    assert "cannot be undone" in confirm
    assert Endpoint.objects.filter(pk=ours.pk).exists()
    client.post(f"/portal/endpoints/{ours.pk}/delete")
    assert not Endpoint.objects.filter(pk=ours.pk).exists()


def test_reveal_needs_a_confirmation_and_rotation_shows_the_new_secret_once() -> None:
    ours = endpoint_of("acme")
    first = ours.secrets.get().value
    client = portal_client("acme")
    confirmation = text(client.get(f"/portal/endpoints/{ours.pk}/secret"))
    assert first not in confirmation
    assert first not in text(client.get(f"/portal/endpoints/{ours.pk}/"))
    revealed = client.post(f"/portal/endpoints/{ours.pk}/secret")
    assert first in text(revealed)
    assert "no-store" in revealed["Cache-Control"]

    rotated = client.post(f"/portal/endpoints/{ours.pk}/rotate", {"grace_seconds": "3600"})
    secrets = list(ours.secrets.order_by("created_at"))
    assert len(secrets) == 2
    assert secrets[1].value in text(rotated)
    assert first not in text(rotated)
    expires_at = secrets[0].expires_at
    assert expires_at is not None
    assert abs((expires_at - timezone.now()).total_seconds() - 3600) < 60
    # Both sign during the grace period; the reveal page shows both.
    both = text(client.post(f"/portal/endpoints/{ours.pk}/secret"))
    assert first in both
    assert secrets[1].value in both


# --- deliveries ------------------------------------------------------------------------


def test_test_event_attempt_and_retry_on_the_real_worker(
    celery_worker: object, receiver: Receiver
) -> None:
    ours = endpoint_of("acme", receiver.url, **FAST_POLICY)
    client = portal_client("acme")
    receiver.script(401)  # refused: dead-lettered at once
    sent = client.post(f"/portal/endpoints/{ours.pk}/test")
    assert sent.status_code == 302
    delivery = Delivery.objects.get()
    assert sent["Location"].startswith(f"/portal/deliveries/{delivery.pk}/")
    [request] = receiver.wait_for(1)
    assert request.headers["X-Webhook-Event"] == "webhook.test"
    wait_until(
        lambda: Delivery.objects.filter(
            pk=delivery.pk, status=DeliveryStatus.DEAD_LETTERED
        ).exists(),
        what="dead-lettered",
    )
    page = text(client.get(f"/portal/deliveries/{delivery.pk}/"))
    assert "401" in page
    assert "&quot;test&quot;: true" in page  # the payload sent
    assert "Retry now" in page
    assert page.count('class="attempt"') == 1

    client.post(f"/portal/deliveries/{delivery.pk}/retry")
    receiver.wait_for(2)
    wait_until(
        lambda: Delivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.SUCCEEDED).exists(),
        what="retried delivery succeeded",
    )
    page = text(client.get(f"/portal/deliveries/{delivery.pk}/"))
    assert page.count('class="attempt"') == 2
    assert Attempt.objects.filter(delivery=delivery, response_status=200).exists()


def test_delivery_log_filters_and_pages() -> None:
    ours = endpoint_of("acme", "https://one.example.com/")
    other = endpoint_of("acme", "https://two.example.com/")
    for _ in range(PAGE_SIZE + 2):
        delivery_to(ours, DeliveryStatus.SUCCEEDED)
    failed = delivery_to(other, DeliveryStatus.DEAD_LETTERED)
    client = portal_client("acme")

    first = text(client.get("/portal/deliveries/"))
    assert f"{PAGE_SIZE + 3} deliveries" in first
    assert first.count('class="delivery"') == PAGE_SIZE
    assert 'rel="next"' in first
    second = text(client.get("/portal/deliveries/?page=2"))
    assert second.count('class="delivery"') == 3

    dead = text(client.get("/portal/deliveries/?status=dead_lettered"))
    assert "1 delivery" in dead
    assert f"/portal/deliveries/{failed.pk}/" in dead
    by_endpoint = text(client.get(f"/portal/deliveries/?endpoint={other.pk}"))
    assert "1 delivery" in by_endpoint
    assert "0 deliveries" in text(client.get("/portal/deliveries/?event_type=order.created"))
    later = (timezone.now() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert "0 deliveries" in text(client.get(f"/portal/deliveries/?since={later}"))
    # Bad filter input is a form error on the page, not a 500.
    assert client.get("/portal/deliveries/?status=nonsense&since=never").status_code == 200


def test_recover_previews_then_retries_only_this_tenants_failures() -> None:
    ours = endpoint_of("acme")
    theirs = endpoint_of("globex")
    old = delivery_to(ours)
    Delivery.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=2))
    recent = [delivery_to(ours), delivery_to(ours)]
    delivery_to(ours, DeliveryStatus.SUCCEEDED)
    their_failure = delivery_to(theirs)
    client = portal_client("acme")
    since = (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")

    preview = text(client.post("/portal/recover", {"since": since, "preview": "1"}))
    assert re.search(r"<strong>2</strong> failed deliveries would be sent again", preview)
    assert not Delivery.objects.filter(status=DeliveryStatus.PENDING).exists()

    done = text(client.post("/portal/recover", {"since": since, "confirm": "1"}))
    assert "2 deliveries queued again" in done
    assert set(
        Delivery.objects.filter(status=DeliveryStatus.PENDING).values_list("pk", flat=True)
    ) == {d.pk for d in recent}
    their_failure.refresh_from_db()
    assert their_failure.status == DeliveryStatus.DEAD_LETTERED
    old.refresh_from_db()
    assert old.status == DeliveryStatus.DEAD_LETTERED
    assert client.post("/portal/recover", {"since": "not a time"}).status_code == 200


def test_the_catalogue_shows_schemas_and_examples() -> None:
    page = text(portal_client("acme").get("/portal/event-types"))
    assert "<code>endpoint.suspended</code>" in page
    assert "suspended_at" in page
    assert "Schema of version 1" in page


class _Controls(HTMLParser):
    """Collects form controls, labels and landmarks of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.controls: list[dict[str, str | None]] = []
        self.labelled: set[str] = set()
        self.ids: set[str] = set()
        self.landmarks: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        if tag in ("main", "nav", "header", "footer"):
            self.landmarks.add(tag)
        if tag == "label" and found.get("for"):
            self.labelled.add(str(found["for"]))
        if tag in ("input", "select", "textarea") and found.get("type") not in ("hidden",):
            self.controls.append(found)


def test_pages_are_labelled_and_have_landmarks() -> None:
    ours = endpoint_of("acme")
    delivery = delivery_to(ours)
    client = portal_client("acme")
    pages = [
        "/portal/",
        "/portal/endpoints/new",
        f"/portal/endpoints/{ours.pk}/",
        f"/portal/endpoints/{ours.pk}/edit",
        f"/portal/endpoints/{ours.pk}/rotate",
        "/portal/deliveries/",
        f"/portal/deliveries/{delivery.pk}/",
        "/portal/recover",
        "/portal/event-types",
    ]
    for path in pages:
        parsed = _Controls()
        parsed.feed(text(client.get(path)))
        assert {"main", "nav", "header"} <= parsed.landmarks, path
        for control in parsed.controls:
            assert control.get("id") in parsed.labelled, (path, control)
            described = control.get("aria-describedby")
            if described:
                assert set(str(described).split()) <= parsed.ids, (path, control)


def test_a_host_restyles_the_portal_by_overriding_its_templates(
    tmp_path: Path, settings: Settings
) -> None:
    override = tmp_path / "webhooks_portal" / "base.html"
    override.parent.mkdir()
    # Extending the template it replaces keeps everything but the blocks it redefines.
    override.write_text(
        '{% extends "webhooks_portal/base.html" %}'
        "{% block brand %}Acme Cloud webhooks{% endblock %}"
        "{% block styles %}<style>body { background: #fafafa; }</style>{% endblock %}"
    )
    templates = copy.deepcopy(settings.TEMPLATES)
    templates[0]["DIRS"] = [str(tmp_path), *templates[0].get("DIRS", [])]
    settings.TEMPLATES = templates
    page = text(portal_client("acme").get("/portal/"))
    assert "Acme Cloud webhooks" in page
    assert "background: #fafafa" in page
    assert "--accent" not in page  # the default styles are gone
    assert "Add an endpoint" in page  # the page itself is unchanged
