"""Delivery auth end to end: an endpoint made through the API with OAuth2 client credentials
and mutual TLS, an event posted through the API, a real Celery worker delivering it to a
TLS receiver that demands the client certificate and checks the bearer token."""

import json
import logging
from typing import Any

import pytest
from rest_framework.test import APIClient

from deliveries.models import Attempt, Delivery, DeliveryStatus
from tests.conftest import wait_until
from tests.deliveries.auth_peers import PKI, TokenServer, checking_bearer, server_context
from tests.fixtures import FAST_POLICY
from tests.receiver import Receiver

API = "/api/v1"


def post(api: APIClient, path: str, payload: dict[str, Any]) -> Any:
    return api.post(f"{API}{path}", data=json.dumps(payload), content_type="application/json")


@pytest.mark.django_db(transaction=True)
def test_oauth2_and_mutual_tls_through_the_api_and_a_worker(
    celery_worker: object,
    api: APIClient,
    token_server: TokenServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    pki = PKI.create()
    server = pki.issue("receiver", names=("localhost",))
    client = pki.issue("sender", client=True)
    context = server_context(pki, server, require_client_cert=True)
    with Receiver.running(tls=context) as receiver:
        receiver.handler = checking_bearer(token_server)
        created = post(
            api,
            "/endpoints",
            {
                "url": receiver.url,
                "event_types": ["invoice.*"],
                "auth": {
                    "type": "oauth2_client_credentials",
                    "token_url": token_server.url,
                    "client_id": token_server.client_id,
                    "client_secret": token_server.client_secret,
                },
                "client_certificate": client.certificate,
                "client_key": client.key,
                "ca_certificates": pki.ca.certificate,
                **FAST_POLICY,
            },
        )
        assert created.status_code == 201, created.content
        text = created.content.decode()
        assert token_server.client_secret not in text
        assert "PRIVATE KEY" not in text

        accepted = post(api, "/events", {"type": "invoice.paid", "data": {"invoice": "in_1"}})
        assert accepted.status_code in (201, 202), accepted.content
        (request,) = receiver.wait_for(1)
        wait_until(
            lambda: Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED).exists(),
            what="delivered with OAuth2 over mutual TLS",
        )
    assert request.headers["Authorization"] == "Bearer tok-1"
    attempt = Attempt.objects.get()
    assert attempt.response_status == 200
    assert "tok-1" not in json.dumps(attempt.request_headers)
    for secret in ("tok-1", token_server.client_secret, client.key.splitlines()[1]):
        assert secret not in caplog.text
