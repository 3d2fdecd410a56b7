"""Portal links and sessions: the API contract, one use only (also under a race), expiry,
the cookie, and the host's resolver."""

import json
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.http import HttpRequest
from django.test import Client
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from deliveries import services
from deliveries.models import PortalLink
from deliveries.portal import access

from .helpers import link_path, portal_client

pytestmark = pytest.mark.django_db


def create(api: APIClient, payload: Any) -> Any:
    return api.post(
        "/api/v1/portal-sessions", data=json.dumps(payload), content_type="application/json"
    )


def test_api_issues_an_absolute_one_time_link_stored_as_a_hash(api: APIClient) -> None:
    before = timezone.now()
    response = create(api, {"tenant": "acme", "expires_in": 600})
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"url", "expires_at"}
    assert body["url"].startswith("http://testserver/portal/open/")
    expires_at = parse_datetime(body["expires_at"])
    assert expires_at is not None
    assert before <= expires_at - timedelta(seconds=600) <= timezone.now()
    assert response["Cache-Control"] == "no-store"
    token = body["url"].rsplit("/", 1)[-1]
    link = PortalLink.objects.get()
    assert link.tenant == "acme"
    assert token not in link.token_hash
    assert len(link.token_hash) == 64


def test_api_defaults_to_an_hour_and_caps_at_a_day(api: APIClient, settings: Settings) -> None:
    response = create(api, {"tenant": "acme"})
    expires_at = parse_datetime(response.json()["expires_at"])
    assert expires_at is not None
    assert abs((expires_at - timezone.now()).total_seconds() - 3600) < 5
    assert create(api, {"tenant": "acme", "expires_in": 86400}).status_code == 201
    settings.WEBHOOKS_PORTAL_BASE_URL = "https://app.example.com/"
    assert (
        create(api, {"tenant": "acme"})
        .json()["url"]
        .startswith("https://app.example.com/portal/open/")
    )


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"tenant": "acme", "expires_in": 86401}, "expires_in"),
        ({"tenant": "acme", "expires_in": 0}, "expires_in"),
        ({"tenant": "acme", "expires_in": "soon"}, "expires_in"),
        ({"tenant": "not ok"}, "tenant"),
        ({"tenant": ""}, "tenant"),
        ({"expires_in": 60}, "tenant"),
    ],
)
def test_api_refuses_bad_input_and_writes_nothing(
    api: APIClient, payload: dict[str, Any], field: str
) -> None:
    response = create(api, payload)
    assert response.status_code == 400
    assert field in response.json()
    assert not PortalLink.objects.exists()


def test_api_needs_a_token() -> None:
    response = APIClient().post(
        "/api/v1/portal-sessions", data='{"tenant": "acme"}', content_type="application/json"
    )
    assert response.status_code == 401


def test_the_link_opens_a_session_and_leaves_a_clean_url() -> None:
    client = Client()
    path = link_path("acme")
    assert client.get(path).status_code == 200  # the page with the button
    response = client.post(path)
    assert response.status_code == 302
    assert response["Location"] == "/portal/"
    assert response["Referrer-Policy"] == "no-referrer"
    cookie = response.cookies[access.COOKIE]
    assert cookie["path"] == "/portal/"
    assert cookie["httponly"]
    assert cookie["samesite"] == "Lax"
    assert 3590 <= int(cookie["max-age"]) <= 3600
    home = client.get("/portal/")
    assert home.status_code == 200
    assert "acme" in home.content.decode()
    assert "no-store" in home["Cache-Control"]


def test_a_used_link_is_refused_with_a_403_page() -> None:
    path = link_path("acme")
    assert Client().post(path).status_code == 302
    for again in (Client().get(path), Client().post(path)):
        assert again.status_code == 403
        assert "already used or has expired" in again.content.decode()
        assert access.COOKIE not in again.cookies


def test_an_expired_link_is_refused_and_an_unknown_one_alike() -> None:
    path = link_path("acme")
    PortalLink.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert Client().get(path).status_code == 403
    assert Client().post(path).status_code == 403
    assert Client().get("/portal/open/nonsense").status_code == 403
    assert Client().post("/portal/open/nonsense").status_code == 403


def test_the_session_ends_when_the_link_expires_or_on_sign_out() -> None:
    client = portal_client("acme")
    assert client.get("/portal/").status_code == 200
    PortalLink.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert client.get("/portal/").status_code == 403

    client = portal_client("acme")
    assert client.post("/portal/sign-out").status_code == 200
    assert client.get("/portal/").status_code == 403


def test_no_session_no_portal_and_a_forged_cookie_opens_nothing() -> None:
    assert Client().get("/portal/").status_code == 403
    client = Client()
    client.cookies[access.COOKIE] = "1"  # unsigned
    assert client.get("/portal/").status_code == 403


@pytest.mark.django_db(transaction=True)
def test_concurrent_use_of_one_link_opens_exactly_one_session() -> None:
    _, token = services.portal_link_create(tenant="acme")
    racers = 8
    barrier = threading.Barrier(racers)
    opened: list[object] = []
    lock = threading.Lock()

    def use() -> None:
        try:
            barrier.wait()
            link = services.portal_link_open(token=token)
            with lock:
                opened.append(link)
        finally:
            connection.close()

    threads = [threading.Thread(target=use) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(opened) == racers
    assert len([link for link in opened if link is not None]) == 1


def resolve_from_header(request: HttpRequest) -> str | None:
    """A host's resolver: here the tenant comes from a header the host's login set."""
    return request.headers.get("X-Test-Tenant")


def test_the_hosts_resolver_decides_without_a_link(settings: Settings) -> None:
    settings.WEBHOOKS_PORTAL_TENANT_RESOLVER = (
        "tests.deliveries.portal.test_sessions.resolve_from_header"
    )
    assert Client().get("/portal/").status_code == 403
    page = Client().get("/portal/", HTTP_X_TEST_TENANT="globex")
    assert page.status_code == 200
    assert "globex" in page.content.decode()
    # An id that is not a tenant id is refused, not used.
    assert Client().get("/portal/", HTTP_X_TEST_TENANT="a b").status_code == 403


def test_links_are_purged_a_day_after_they_expire() -> None:
    services.portal_link_create(tenant="acme")
    old, _ = services.portal_link_create(tenant="acme")
    PortalLink.objects.filter(pk=old.pk).update(expires_at=timezone.now() - timedelta(days=2))
    assert services.portal_links_purge() == 1
    assert PortalLink.objects.count() == 1


def test_a_resolver_that_cannot_be_imported_fails_the_system_check(settings: Settings) -> None:
    from deliveries.portal.checks import check_tenant_resolver

    assert check_tenant_resolver(None) == []
    settings.WEBHOOKS_PORTAL_TENANT_RESOLVER = "tests.nowhere.tenant_of"
    [error] = check_tenant_resolver(None)
    assert error.id == "webhooks.E040"
    settings.WEBHOOKS_PORTAL_TENANT_RESOLVER = (
        "tests.deliveries.portal.test_sessions.resolve_from_header"
    )
    assert check_tenant_resolver(None) == []


def test_the_openapi_schema_documents_portal_sessions_and_tenant_filters(api: APIClient) -> None:
    schema = api.get("/api/v1/schema", {"format": "json"}).json()
    paths = schema["paths"]
    assert "post" in paths["/api/v1/portal-sessions"]
    for listed in ("/api/v1/endpoints", "/api/v1/events", "/api/v1/deliveries"):
        names = {p["name"] for p in paths[listed]["get"]["parameters"]}
        assert "tenant" in names, listed


def test_an_operator_ends_sessions_and_unused_links_in_the_admin() -> None:
    User.objects.create_superuser("op", "op@example.com", "pw")
    admin = Client()
    admin.login(username="op", password="pw")
    tenant_client = portal_client("acme")
    unused = link_path("acme")
    listing = admin.get("/admin/deliveries/portallink/")
    assert listing.status_code == 200
    assert "token_hash" not in listing.content.decode()
    response = admin.post(
        "/admin/deliveries/portallink/",
        {
            "action": "end_sessions",
            "_selected_action": [str(pk) for pk in PortalLink.objects.values_list("pk", flat=True)],
        },
    )
    assert response.status_code == 302
    assert tenant_client.get("/portal/").status_code == 403
    assert Client().get(unused).status_code == 403


def test_knowing_secret_key_does_not_forge_a_session() -> None:
    """The cookie was once a signed row id, so SECRET_KEY alone forged any session.
    Now it carries the session's random secret, and the database keeps only its hash."""
    from django.core import signing

    victim = portal_client("acme")
    link = PortalLink.objects.get(used_at__isnull=False)
    cookie = victim.cookies[access.COOKIE].value
    assert not cookie.startswith(f"{link.pk}:")  # not the row id
    assert link.session_hash
    assert link.session_hash not in cookie

    attacker = Client()
    forged = signing.get_cookie_signer(salt=access.COOKIE + access.SALT).sign(str(link.pk))
    attacker.cookies[access.COOKIE] = forged
    assert attacker.get("/portal/").status_code == 403
    assert victim.get("/portal/").status_code == 200
