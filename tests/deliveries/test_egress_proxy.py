"""Delivery auth: every delivery (and token request) through the egress proxy
(``WEBHOOKS_EGRESS_PROXY_URL``), a real forward proxy on 127.0.0.1; the SSRF guard still
judges the target before the proxy is asked."""

import base64
import logging
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from django.core.checks import run_checks
from pytest_django.fixtures import Settings as SettingsWrapper

from deliveries import services
from deliveries.destinations.http_client import client_tls, transport
from deliveries.models import Attempt, Delivery, DeliveryStatus
from tests.conftest import wait_until
from tests.deliveries.auth_peers import PKI, ForwardProxy, TokenServer, server_context
from tests.fixtures import FAST_POLICY
from tests.raw_peer import ENDS_WITH_CONNECTION, trickling
from tests.receiver import Receiver
from webhooks_core.egress.ssrf import AddressPolicy, parse_networks

BASIC = "Basic " + base64.b64encode(b"relay:pr0xy-pass").decode()


@pytest.fixture
def proxy() -> Iterator[ForwardProxy]:
    with ForwardProxy(required_auth=BASIC).running() as running:
        yield running


@pytest.fixture
def via_proxy(settings: SettingsWrapper, proxy: ForwardProxy) -> ForwardProxy:
    settings.WEBHOOKS_EGRESS_PROXY_URL = f"http://relay:pr0xy-pass@127.0.0.1:{proxy.port}"
    return proxy


@pytest.mark.django_db(transaction=True)
def test_deliveries_and_token_requests_go_through_the_proxy(
    celery_worker: object,
    receiver: Receiver,
    via_proxy: ForwardProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with TokenServer().running() as token_server:
        services.endpoint_create(
            url=receiver.url,
            event_types=["*"],
            auth={
                "type": "oauth2_client_credentials",
                "token_url": token_server.url,
                "client_id": token_server.client_id,
                "client_secret": token_server.client_secret,
            },
            **FAST_POLICY,
        )
        services.emit("invoice.paid", {"invoice": "in_1"})
        (request,) = receiver.wait_for(1)
        wait_until(
            lambda: Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED).exists(),
            what="delivered through the proxy",
        )
    assert request.headers["Authorization"] == "Bearer tok-1"
    assert via_proxy.seen == [f"POST {token_server.url}", f"POST {receiver.url}"]
    assert via_proxy.auth_seen == [BASIC, BASIC]
    assert "proxy-authorization" not in {name.lower() for name in request.headers}
    assert "pr0xy-pass" not in caplog.text
    # Every attempt's stored headers (a first one may have failed: the test proxy closes each
    # connection after one request, which the client can reuse as it closes, and retry).
    attempts = list(Attempt.objects.all())
    assert attempts
    for attempt in attempts:
        assert "proxy-authorization" not in {h.lower() for h in attempt.request_headers}


def test_https_goes_through_a_connect_tunnel_with_mutual_tls(proxy: ForwardProxy) -> None:
    pki = PKI.create()
    server = pki.issue("receiver", names=("localhost",))
    client = pki.issue("sender", client=True)
    tls = client_tls.ClientTLS(client.certificate, client.key, pki.ca.certificate)
    context = server_context(pki, server, require_client_cert=True)
    with Receiver.running(tls=context) as tls_receiver:
        result = transport.post(
            tls_receiver.url,
            b"{}",
            {"Content-Type": "application/json"},
            connect_timeout=1,
            read_timeout=2,
            policy=AddressPolicy(parse_networks("127.0.0.0/8,::1"), require_https=True),
            tls=tls,
            proxy_url=f"http://relay:pr0xy-pass@127.0.0.1:{proxy.port}",
        )
        assert result.status_code == 200, result.error
        assert proxy.seen == [f"CONNECT localhost:{tls_receiver.port}"]
        assert len(tls_receiver.requests) == 1


@pytest.mark.parametrize(
    "url", ["http://10.0.0.1/hook", "http://169.254.169.254/latest/meta-data", "http://inside/"]
)
def test_the_guard_still_refuses_a_target_before_the_proxy_is_asked(
    proxy: ForwardProxy, url: str
) -> None:
    policy = AddressPolicy(
        parse_networks("127.0.0.0/8"),
        require_https=False,
        resolver=lambda host, port: {"inside": ["192.168.1.5"]}[host],
    )
    result = transport.post(
        url,
        b"{}",
        {},
        connect_timeout=1,
        read_timeout=1,
        policy=policy,
        proxy_url=proxy.url,
    )
    assert result.status_code is None
    assert result.error.startswith("refused by the SSRF guard:")
    assert proxy.seen == []


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("https://proxy:3128", "it must be an http:// URL"),
        ("http://proxy", "it must name a host and a port"),
        ("http://proxy:3128/path", "no path"),
    ],
)
def test_a_bad_proxy_setting_fails_the_system_check(
    settings: SettingsWrapper, value: str, problem: str
) -> None:
    settings.WEBHOOKS_EGRESS_PROXY_URL = value
    errors = [e for e in run_checks() if e.id == "webhooks.E012"]
    assert len(errors) == 1
    assert problem in errors[0].msg


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("head", ENDS_WITH_CONNECTION.values(), ids=ENDS_WITH_CONNECTION.keys())
def test_a_proxied_answer_that_ends_with_its_connection_still_ends_by_its_total_deadline(
    proxy: ForwardProxy, head: bytes, scheme: str
) -> None:
    # As on the direct path (`test_http_exchange`): http.client lets go of the socket of
    # an answer that ends with its connection, and through the proxy manager's path the
    # deadline held only the connection, so a trickling receiver outlived the deadline.
    # https goes through a CONNECT tunnel: the socket then is the TLS one.
    pki = PKI.create()
    context = server_context(
        pki, pki.issue("receiver", names=("127.0.0.1",)), require_client_cert=False
    )
    tls = client_tls.ClientTLS(ca_certificates=pki.ca.certificate)
    with trickling(head, tls=context if scheme == "https" else None) as peer:
        url = peer.url.replace("http:", f"{scheme}:", 1)
        result = transport.post(
            url,
            b"{}",
            {},
            connect_timeout=0.5,
            read_timeout=1.0,
            tls=tls,
            proxy_url=f"http://relay:pr0xy-pass@127.0.0.1:{proxy.port}",
        )
    tunnel = f"CONNECT {urlsplit(url).netloc}"
    assert proxy.seen == [tunnel if scheme == "https" else f"POST {url}"]
    assert result.status_code == 200, result.error
    assert "within its total deadline" in result.error
    assert result.duration_ms < 5000


def test_a_proxy_trickling_its_answer_to_connect_is_held_to_the_deadline_too() -> None:
    # The tunnel's set-up is part of the request: the deadline holds the connection from
    # its connect on, not only once the request is written into the tunnel.
    with trickling(b"HTTP/1.1 200 Connection established\r\nX-Wait: ") as slow_proxy:
        result = transport.post(
            "https://127.0.0.1:9/hook",
            b"{}",
            {},
            connect_timeout=0.5,
            read_timeout=1.0,
            proxy_url=f"http://127.0.0.1:{urlsplit(slow_proxy.url).port}",
        )
    assert result.status_code is None
    assert "within its total deadline" in result.error, result.error
    assert result.duration_ms < 5000
