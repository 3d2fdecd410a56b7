"""Delivery auth: mutual TLS per endpoint, against a real TLS server on
127.0.0.1 that demands a client certificate of a private CA (made in the test)."""

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rest_framework.test import APIClient

from deliveries import services
from deliveries.destinations.http_client import client_tls, transport
from deliveries.models import Attempt, Delivery, DeliveryStatus, Endpoint
from tests.conftest import wait_until
from tests.deliveries.auth_peers import PKI, Issued, server_context
from tests.fixtures import FAST_POLICY
from tests.receiver import Receiver
from webhooks_core.egress.ssrf import AddressPolicy, parse_networks

API = "/api/v1"


@pytest.fixture(scope="module")
def pki() -> PKI:
    return PKI.create()


@pytest.fixture(scope="module")
def client_cert(pki: PKI) -> Issued:
    return pki.issue("webhooks sender", client=True)


@pytest.fixture
def tls_receiver(pki: PKI) -> Iterator[Receiver]:
    server = pki.issue("receiver", names=("localhost", "127.0.0.1", "receiver.test"))
    with Receiver.running(tls=server_context(pki, server, require_client_cert=True)) as peer:
        yield peer


def settled(status: str) -> bool:
    return Delivery.objects.filter(status=status).exists()


@pytest.mark.django_db(transaction=True)
def test_a_delivery_with_the_client_certificate_gets_through(
    celery_worker: object,
    tls_receiver: Receiver,
    pki: PKI,
    client_cert: Issued,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    services.endpoint_create(
        url=tls_receiver.url,
        event_types=["*"],
        client_certificate=client_cert.certificate,
        client_key=client_cert.key,
        ca_certificates=pki.ca.certificate,
        **FAST_POLICY,
    )
    services.emit("invoice.paid", {"invoice": "in_1"})
    tls_receiver.wait_for(1)
    wait_until(lambda: settled(DeliveryStatus.SUCCEEDED), what="delivered over mTLS")
    assert client_cert.key not in caplog.text


@pytest.mark.django_db(transaction=True)
def test_without_the_client_certificate_the_attempt_fails_clearly(
    celery_worker: object, tls_receiver: Receiver, pki: PKI
) -> None:
    services.endpoint_create(
        url=tls_receiver.url,
        event_types=["*"],
        ca_certificates=pki.ca.certificate,  # trusts the server, presents nothing
        **{**FAST_POLICY, "max_attempts": 2},
    )
    services.emit("invoice.paid", {"invoice": "in_1"})
    wait_until(lambda: settled(DeliveryStatus.DEAD_LETTERED), what="dead-lettered")
    attempts = list(Attempt.objects.all())
    assert len(attempts) == 2
    assert all(a.response_status is None for a in attempts)
    assert all("SSL" in a.error or "certificate" in a.error for a in attempts), attempts[0].error
    assert not tls_receiver.requests


@pytest.mark.django_db(transaction=True)
def test_without_the_private_ca_the_server_is_not_trusted(
    celery_worker: object, tls_receiver: Receiver, client_cert: Issued
) -> None:
    services.endpoint_create(
        url=tls_receiver.url,
        event_types=["*"],
        client_certificate=client_cert.certificate,
        client_key=client_cert.key,
        **{**FAST_POLICY, "max_attempts": 1},
    )
    services.emit("invoice.paid", {"invoice": "in_1"})
    wait_until(lambda: settled(DeliveryStatus.DEAD_LETTERED), what="dead-lettered")
    assert "CERTIFICATE_VERIFY_FAILED" in Attempt.objects.get().error


def test_the_pinned_address_is_verified_for_the_urls_host_name(
    tls_receiver: Receiver, pki: PKI, client_cert: Issued
) -> None:
    """The SSRF guard connects to the address it checked; TLS still sends SNI for, and
    verifies the certificate against, the name in the URL."""
    tls = client_tls.ClientTLS(client_cert.certificate, client_cert.key, pki.ca.certificate)
    names = {"receiver.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}
    policy = AddressPolicy(
        allowed_networks=parse_networks("127.0.0.0/8"),
        require_https=False,
        resolver=lambda host, port: names[host],
    )

    def post(host: str) -> transport.HttpResult:
        return transport.post(
            f"https://{host}:{tls_receiver.port}/hook",
            b"{}",
            {"Content-Type": "application/json"},
            connect_timeout=1,
            read_timeout=2,
            policy=policy,
            tls=tls,
        )

    assert post("receiver.test").status_code == 200
    refused = post("other.test")  # the certificate does not name it
    assert refused.status_code is None
    assert "other.test" in refused.error


def test_a_context_is_built_once_per_credentials(pki: PKI, client_cert: Issued) -> None:
    tls = client_tls.ClientTLS(client_cert.certificate, client_cert.key, pki.ca.certificate)
    again = client_tls.ClientTLS(client_cert.certificate, client_cert.key, pki.ca.certificate)
    assert client_tls.context_for(tls) is client_tls.context_for(again)
    other = client_tls.ClientTLS(client_cert.certificate, client_cert.key, "")
    assert client_tls.context_for(other) is not client_tls.context_for(tls)
    assert client_cert.key not in repr(tls)


# --- validation (API) -----------------------------------------------------------------


def create(api: APIClient, **fields: Any) -> Any:
    payload = {"url": "https://1.1.1.1/hook", "event_types": ["*"], **fields}
    return api.post(f"{API}/endpoints", data=json.dumps(payload), content_type="application/json")


@pytest.mark.django_db
def test_the_api_stores_the_key_encrypted_and_never_returns_it(
    api: APIClient, pki: PKI, client_cert: Issued
) -> None:
    response = create(
        api,
        client_certificate=client_cert.certificate,
        client_key=client_cert.key,
        ca_certificates=pki.ca.certificate,
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert "PRIVATE KEY" not in response.content.decode()
    assert "client_key" not in body
    assert body["has_client_key"] is True
    assert body["client_certificate"] == client_cert.certificate.strip()
    endpoint = Endpoint.objects.get(pk=body["id"])
    assert "PRIVATE KEY" not in endpoint.encrypted_client_key
    assert "PRIVATE KEY" not in api.get(f"{API}/endpoints/{endpoint.pk}").content.decode()

    # An update that leaves the key out keeps it; removing the certificate removes both.
    kept = api.patch(
        f"{API}/endpoints/{endpoint.pk}",
        data=json.dumps({"description": "x", "client_certificate": client_cert.certificate}),
        content_type="application/json",
    )
    assert kept.status_code == 200, kept.content
    assert kept.json()["has_client_key"] is True
    removed = api.patch(
        f"{API}/endpoints/{endpoint.pk}",
        data=json.dumps({"client_certificate": ""}),
        content_type="application/json",
    )
    assert removed.status_code == 200, removed.content
    assert removed.json()["has_client_key"] is False


def _cases(pki: PKI, client_cert: Issued) -> dict[str, tuple[dict[str, str], str, str]]:
    other = pki.issue("someone else", client=True)
    now = datetime.now(UTC)
    expired = pki.issue(
        "expired",
        client=True,
        not_before=now - timedelta(days=10),
        not_after=now - timedelta(days=1),
    )
    future = pki.issue(
        "future", client=True, not_before=now + timedelta(days=1), not_after=now + timedelta(days=9)
    )
    return {
        "mismatched key": (
            {"client_certificate": client_cert.certificate, "client_key": other.key},
            "client_key",
            "does not match the certificate",
        ),
        "expired": (
            {"client_certificate": expired.certificate, "client_key": expired.key},
            "client_certificate",
            "The certificate expired on",
        ),
        "not yet valid": (
            {"client_certificate": future.certificate, "client_key": future.key},
            "client_certificate",
            "not valid before",
        ),
        "unparsable certificate": (
            {"client_certificate": "-----BEGIN CERTIFICATE-----\nxx\n", "client_key": other.key},
            "client_certificate",
            "not a PEM certificate",
        ),
        "unparsable key": (
            {"client_certificate": client_cert.certificate, "client_key": "not a key"},
            "client_key",
            "not a PEM private key",
        ),
        "encrypted key": (
            {
                "client_certificate": client_cert.certificate,
                "client_key": client_cert.encrypted_key(),
            },
            "client_key",
            "The key is encrypted",
        ),
        "key without certificate": (
            {"client_key": client_cert.key},
            "client_certificate",
            "Give the certificate",
        ),
        "certificate without key": (
            {"client_certificate": client_cert.certificate},
            "client_key",
            "Give the certificate's private key",
        ),
        "unparsable CA": ({"ca_certificates": "nope"}, "ca_certificates", "not PEM"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "mismatched key",
        "expired",
        "not yet valid",
        "unparsable certificate",
        "unparsable key",
        "encrypted key",
        "key without certificate",
        "certificate without key",
        "unparsable CA",
    ],
)
@pytest.mark.django_db
def test_bad_tls_material_is_a_400(
    api: APIClient, pki: PKI, client_cert: Issued, case: str
) -> None:
    fields, field, message = _cases(pki, client_cert)[case]
    response = create(api, **fields)
    assert response.status_code == 400, response.content
    assert any(message in problem for problem in response.json()[field]), response.json()
    for value in fields.values():
        for line in value.splitlines()[1:-1]:
            assert line not in response.content.decode()  # no PEM body echoed back
    assert not Endpoint.objects.exists()


@pytest.mark.django_db
def test_mutual_tls_needs_an_https_url(api: APIClient, pki: PKI) -> None:
    response = create(api, url="http://1.1.1.1/hook", ca_certificates=pki.ca.certificate)
    assert response.status_code == 400
    assert "https" in response.json()["ca_certificates"][0]


@pytest.mark.django_db
def test_key_rotation_reencrypts_the_client_secret_and_key(
    settings: Any, pki: PKI, client_cert: Issued
) -> None:
    import io

    from django.core.management import call_command

    from webhooks_core.crypto import encryption

    old, new = encryption.generate_key(), encryption.generate_key()
    settings.WEBHOOKS_ENCRYPTION_KEY = old
    endpoint, _ = services.endpoint_create(
        url="https://1.1.1.1/hook",
        event_types=["*"],
        auth={
            "type": "oauth2_client_credentials",
            "token_url": "https://1.1.1.1/token",
            "client_id": "c",
            "client_secret": "rotate-me",
        },
        client_certificate=client_cert.certificate,
        client_key=client_cert.key,
    )
    settings.WEBHOOKS_ENCRYPTION_KEY = f"{new},{old}"
    call_command("reencrypt_secrets", stdout=io.StringIO())
    settings.WEBHOOKS_ENCRYPTION_KEY = new  # the old key is gone
    endpoint = Endpoint.objects.get(pk=endpoint.pk)
    credentials = endpoint.oauth2_credentials()
    assert credentials is not None
    assert credentials.client_secret == "rotate-me"
    tls = endpoint.client_tls()
    assert tls is not None
    assert tls.key == client_cert.key.strip()
