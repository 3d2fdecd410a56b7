"""A tenant is one principal whether it comes through its portal or through an API token
limited to it: the same address policy at save and at every connect (for every URL it
chose, a token URL too), the same rules on states, the same fields
(`deliveries.endpoints.principals`)."""

import json
import socket
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from deliveries import services
from deliveries.models import Attempt, Endpoint, EndpointState, StateSetBy
from tests.conftest import wait_until
from tests.deliveries.auth_peers import TokenServer
from tests.deliveries.portal.helpers import portal_client
from tests.receiver import Receiver

FAST = {
    "backoff_base_seconds": 0.05,
    "backoff_max_seconds": 0.2,
    "connect_timeout_seconds": 1.0,
    "read_timeout_seconds": 2.0,
}
#: A name that does not resolve when the URL is saved, and resolves to loopback at
#: connect time (DNS rebinding).
REBOUND = "rebound.example"


@pytest.fixture
def acme() -> APIClient:
    out = StringIO()
    call_command("create_api_token", "acme-integration", "--tenant", "acme", stdout=out)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {out.getvalue().strip()}")
    return client


@pytest.fixture
def rebinding(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on `REBOUND` resolves to 127.0.0.1 (in this process's worker too)."""
    previous = socket.getaddrinfo

    def resolve(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        return previous("127.0.0.1" if name == REBOUND else host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)


def send(client: APIClient, method: str, path: str, payload: Any) -> Any:
    return getattr(client, method)(path, data=json.dumps(payload), content_type="application/json")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "redis://127.0.0.1:6379/5?stream=hooks",
        "redis://127.0.0.1:5432/0?stream=hooks",
    ],
)
def test_a_tenants_token_is_refused_what_its_portal_is(acme: APIClient, url: str) -> None:
    # The suite allows loopback for operators (WEBHOOKS_ALLOWED_NETWORKS=127.0.0.0/8,::1).
    response = send(acme, "post", "/api/v1/endpoints", {"url": url, "event_types": ["*"]})
    assert response.status_code == 400, response.content
    assert "public addresses only" in " ".join(response.json()["url"])
    assert not Endpoint.objects.exists()


@pytest.mark.django_db
def test_a_tenants_token_cannot_enable_what_the_operator_disabled(acme: APIClient) -> None:
    endpoint, _ = services.endpoint_create(
        url="https://receiver.example.com/hooks", event_types=["*"], tenant="acme"
    )
    services.endpoint_set_state(endpoint_id=endpoint.pk, state=EndpointState.DISABLED)
    path = f"/api/v1/endpoints/{endpoint.pk}"

    refused = send(acme, "patch", path, {"state": "active", "description": "back on"})
    assert refused.status_code == 403, refused.content
    assert "state" in refused.json()
    endpoint.refresh_from_db()
    assert endpoint.state == EndpointState.DISABLED
    assert endpoint.state_set_by == StateSetBy.OPERATOR
    assert endpoint.description == ""  # nothing of the refused change was written

    assert send(acme, "patch", path, {"state": "suspended"}).status_code == 403
    # What the tenant disabled itself, it may enable again, as in its portal.
    services.endpoint_set_state(endpoint_id=endpoint.pk, state=EndpointState.ACTIVE)
    assert send(acme, "patch", path, {"state": "disabled"}).status_code == 200
    endpoint.refresh_from_db()
    assert endpoint.state_set_by == StateSetBy.TENANT
    assert send(acme, "patch", path, {"state": "active"}).status_code == 200


@pytest.mark.django_db
def test_the_operators_fields_are_refused_to_a_tenants_token(acme: APIClient) -> None:
    created = send(
        acme,
        "post",
        "/api/v1/endpoints",
        {"url": "https://receiver.example.com/hooks", "event_types": ["*"], "max_in_flight": 500},
    )
    assert created.status_code == 403, created.content
    assert created.json()["max_in_flight"] == ["Set by the operator of this service."]
    assert not Endpoint.objects.exists()


@pytest.mark.usefixtures("rebinding")
def test_a_tenants_token_endpoint_is_judged_again_at_connect(
    celery_worker: object, receiver: Receiver, acme: APIClient
) -> None:
    url = f"http://{REBOUND}:{receiver.port}/hook"
    # Saved while the name does not resolve (the guard cannot judge it yet)...
    socket_before = socket.getaddrinfo
    socket.getaddrinfo = _unresolvable(socket_before)
    try:
        created = send(acme, "post", "/api/v1/endpoints", {"url": url, "event_types": ["*"]})
    finally:
        socket.getaddrinfo = socket_before
    assert created.status_code == 201, created.content
    Endpoint.objects.filter(pk=created.json()["id"]).update(**FAST)
    # ... then it resolves to loopback: the tenant's policy refuses it at connect.
    services.emit("invoice.paid", {"n": 1}, tenant="acme")
    wait_until(lambda: Attempt.objects.exists(), what="an attempt")
    attempt = Attempt.objects.get()
    assert "public addresses only" in attempt.error, attempt.error
    assert not receiver.requests


def _unresolvable(resolve: Any) -> Any:
    def refuse(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in (REBOUND, REBOUND.encode()):
            raise socket.gaierror(socket.EAI_NONAME, "not yet")
        return resolve(host, port, *args, **kwargs)

    return refuse


@pytest.mark.usefixtures("rebinding")
def test_a_token_url_a_tenant_set_is_fetched_under_the_tenants_policy(
    celery_worker: object, receiver: Receiver
) -> None:
    with TokenServer().running() as token_server:
        # The operator chose the endpoint's URL (loopback, under its allowance) ...
        endpoint, _ = services.endpoint_create(
            url=receiver.url, event_types=["*"], tenant="acme", **FAST
        )
        # ... the tenant sets OAuth2 in its portal, with a token URL that does not
        # resolve yet.
        token_url = f"http://{REBOUND}:{token_server.port}/oauth/token"
        socket_before = socket.getaddrinfo
        socket.getaddrinfo = _unresolvable(socket_before)
        try:
            page = portal_client("acme").post(
                f"/portal/endpoints/{endpoint.pk}/edit",
                {
                    "url": receiver.url,
                    "event_types": ["*"],
                    "auth_type": "oauth2_client_credentials",
                    "oauth2_token_url": token_url,
                    "oauth2_client_id": token_server.client_id,
                    "oauth2_client_secret": token_server.client_secret,
                },
            )
        finally:
            socket.getaddrinfo = socket_before
        assert page.status_code == 302, page.content.decode()[-3000:]
        endpoint.refresh_from_db()
        assert endpoint.auth is not None
        assert endpoint.auth["token_url"] == token_url

        services.emit("invoice.paid", {"n": 1}, tenant="acme")
        wait_until(lambda: Attempt.objects.exists(), what="an attempt")
        attempt = Attempt.objects.get()
        assert "refused by the SSRF guard" in attempt.error, attempt.error
        assert token_server.fetches == 0
        assert not receiver.requests
