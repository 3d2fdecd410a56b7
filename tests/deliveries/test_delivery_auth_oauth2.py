"""Delivery auth: OAuth2 client credentials (RFC 6749 §4.4) per endpoint.

Against real peers on 127.0.0.1: a token server that counts its fetches, an endpoint that
takes only the token server's current token (401 otherwise), a real Celery worker, Redis
and PostgreSQL.
"""

import json
import logging
import re
import threading
from typing import Any

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from deliveries import conf, services
from deliveries.destinations.http_client import oauth2
from deliveries.models import Attempt, Delivery, DeliveryStatus, Endpoint
from tests.conftest import wait_until
from tests.deliveries.auth_peers import TokenServer, checking_bearer
from tests.fixtures import FAST_POLICY
from tests.receiver import Receiver, Reply
from webhooks_core.egress import deadlines
from webhooks_core.egress.ssrf import AddressPolicy, parse_networks

API = "/api/v1"
LOOPBACK = AddressPolicy(allowed_networks=parse_networks("127.0.0.0/8"), require_https=False)


def auth_of(token_server: TokenServer, **extra: Any) -> dict[str, Any]:
    return {
        "type": "oauth2_client_credentials",
        "token_url": token_server.url,
        "client_id": token_server.client_id,
        "client_secret": token_server.client_secret,
        **extra,
    }


def make(receiver: Receiver, token_server: TokenServer, **fields: Any) -> Endpoint:
    endpoint, _ = services.endpoint_create(
        url=receiver.url,
        event_types=["*"],
        auth=auth_of(token_server, scope="webhooks.write", audience="https://rcv.example"),
        **{**FAST_POLICY, **fields},
    )
    return endpoint


def settled(count: int, status: str = DeliveryStatus.SUCCEEDED) -> bool:
    return Delivery.objects.filter(status=status).count() >= count


def take(token_server: TokenServer, endpoint_key: str, **kwargs: Any) -> str:
    credentials = oauth2.ClientCredentials(
        token_server.url, token_server.client_id, token_server.client_secret
    )
    return oauth2.bearer_token(
        credentials,
        scope_key=endpoint_key,
        deadline=deadlines.after(5),
        connect_timeout=1,
        read_timeout=3,
        policy=LOOPBACK,
        redis_url=settings.CELERY_BROKER_URL,
        **kwargs,
    )


@pytest.mark.django_db(transaction=True)
def test_a_delivery_carries_the_bearer_token_and_no_record_or_log_holds_it(
    celery_worker: object,
    receiver: Receiver,
    token_server: TokenServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver.handler = checking_bearer(token_server)
    make(receiver, token_server)

    services.emit("invoice.paid", {"invoice": "in_1"})
    (request,) = receiver.wait_for(1)
    wait_until(lambda: settled(1), what="the delivery succeeded")

    assert request.headers["Authorization"] == "Bearer tok-1"
    assert token_server.forms[0] == {
        "grant_type": ["client_credentials"],
        "scope": ["webhooks.write"],
        "audience": ["https://rcv.example"],
    }
    attempt = Attempt.objects.get()
    assert attempt.response_status == 200
    assert attempt.request_headers["Authorization"] != "Bearer tok-1"
    stored = json.dumps(attempt.request_headers) + attempt.error + attempt.response_body
    assert "tok-1" not in stored
    assert "tok-1" not in caplog.text
    assert token_server.client_secret not in caplog.text


@pytest.mark.django_db(transaction=True)
def test_concurrent_deliveries_share_one_token_fetch(
    celery_worker: object, receiver: Receiver, token_server: TokenServer
) -> None:
    token_server.delay_seconds = 0.3  # long enough for every lane to ask at once
    receiver.handler = checking_bearer(token_server)
    make(receiver, token_server, max_in_flight=8)

    for number in range(8):
        services.emit("invoice.paid", {"invoice": f"in_{number}"})
    receiver.wait_for(8)
    wait_until(lambda: settled(8), what="8 deliveries succeeded")
    assert token_server.fetches == 1
    assert {r.headers["Authorization"] for r in receiver.requests} == {"Bearer tok-1"}


def test_workers_asking_at_once_make_one_fetch(
    token_server: TokenServer, redis_client: Any
) -> None:
    redis_client.flushdb()
    token_server.delay_seconds = 0.3
    tokens: list[str] = []

    def worker() -> None:
        tokens.append(take(token_server, "endpoint-a"))

    threads = [threading.Thread(target=worker) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert tokens == ["tok-1"] * 10
    assert token_server.fetches == 1
    # Kept encrypted in Redis: the token is not in the stored value.
    keys = redis_client.keys(f"{oauth2.KEY_PREFIX}endpoint-a:*")
    (key,) = [k for k in keys if not k.endswith((b":lock", b":failed"))]
    assert b"tok-1" not in redis_client.get(key)


def test_a_token_is_kept_until_shortly_before_it_expires(
    token_server: TokenServer, redis_client: Any
) -> None:
    redis_client.flushdb()
    token_server.expires_in = 1  # kept 0.9 s
    assert take(token_server, "endpoint-b") == "tok-1"
    assert take(token_server, "endpoint-b") == "tok-1"
    assert token_server.fetches == 1
    wait_until(lambda: take(token_server, "endpoint-b") != "tok-1", timeout=5)
    assert token_server.fetches == 2


def test_a_refused_token_is_replaced_once_however_many_workers_report_it(
    token_server: TokenServer, redis_client: Any
) -> None:
    redis_client.flushdb()
    stale = take(token_server, "endpoint-c")
    fresh = [take(token_server, "endpoint-c", stale=stale) for _ in range(3)]
    assert fresh == ["tok-2"] * 3
    assert token_server.fetches == 2


@pytest.mark.django_db(transaction=True)
def test_a_401_refreshes_the_token_and_sends_once_more(
    celery_worker: object, receiver: Receiver, token_server: TokenServer
) -> None:
    receiver.handler = checking_bearer(token_server)
    make(receiver, token_server)
    services.emit("invoice.paid", {"invoice": "in_1"})
    wait_until(lambda: settled(1), what="the first delivery")

    token_server.revoke()  # the endpoint no longer takes tok-1
    services.emit("invoice.paid", {"invoice": "in_2"})
    wait_until(lambda: settled(2), what="the second delivery, after a refresh")
    assert [r.headers["Authorization"] for r in receiver.requests] == [
        "Bearer tok-1",
        "Bearer tok-1",
        "Bearer tok-2",
    ]
    assert token_server.fetches == 2
    second = Delivery.objects.get(event__data__invoice="in_2")
    (attempt,) = Attempt.objects.filter(delivery=second)
    assert attempt.response_status == 200


@pytest.mark.django_db(transaction=True)
def test_a_second_401_after_the_refresh_is_the_endpoints_answer(
    celery_worker: object, receiver: Receiver, token_server: TokenServer
) -> None:
    receiver.default = Reply(401, b"no")
    make(receiver, token_server)
    services.emit("invoice.paid", {"invoice": "in_1"})
    wait_until(lambda: settled(1, DeliveryStatus.DEAD_LETTERED), what="dead-lettered")
    assert len(receiver.requests) == 2  # once with the kept token, once with a fresh one
    assert token_server.fetches == 2
    assert Attempt.objects.get().response_status == 401


@pytest.mark.django_db(transaction=True)
def test_a_token_server_failure_is_a_failed_attempt_with_a_clear_error_then_retried(
    celery_worker: object, receiver: Receiver, token_server: TokenServer
) -> None:
    receiver.handler = checking_bearer(token_server)
    token_server.failure = (503, b'{"error": "temporarily_unavailable"}')
    make(receiver, token_server, backoff_base_seconds=0.5, backoff_max_seconds=1)
    services.emit("invoice.paid", {"invoice": "in_1"})

    wait_until(lambda: Attempt.objects.exists(), what="a failed attempt")
    attempt = Attempt.objects.order_by("started_at").first()
    assert attempt is not None
    assert attempt.response_status is None
    assert attempt.error.startswith("OAuth2 token: the token endpoint http://127.0.0.1:")
    assert "answered HTTP 503 (temporarily_unavailable)" in attempt.error
    assert not receiver.requests  # the endpoint was not sent a request without a token

    token_server.failure = None
    receiver.wait_for(1)
    wait_until(lambda: settled(1), what="the retry succeeded")
    assert receiver.requests[0].headers["Authorization"].startswith("Bearer tok-")


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        ((200, b"not json"), "answered 200 without a JSON object"),
        ((200, b'{"token_type": "Bearer"}'), "answered without an access_token"),
        ((400, b'{"error": "invalid_scope"}'), "answered HTTP 400 (invalid_scope)"),
        ((200, b'{"access_token": "x", "token_type": "mac"}'), "not bearer"),
    ],
)
def test_token_server_answers_that_give_no_token(
    token_server: TokenServer, redis_client: Any, failure: tuple[int, bytes], message: str
) -> None:
    redis_client.flushdb()
    token_server.failure = failure
    with pytest.raises(oauth2.TokenError, match=re.escape(message)):
        take(token_server, "endpoint-d")


def test_a_token_server_that_is_down_and_one_the_guard_refuses(
    token_server: TokenServer, redis_client: Any
) -> None:
    redis_client.flushdb()
    token_server.stop()
    with pytest.raises(oauth2.TokenError, match="did not answer: NewConnectionError"):
        take(token_server, "endpoint-e")
    credentials = oauth2.ClientCredentials("http://10.1.2.3/token", "c", "s")
    with pytest.raises(oauth2.TokenError, match="refused by the SSRF guard"):
        oauth2.bearer_token(
            credentials,
            scope_key="endpoint-f",
            deadline=deadlines.after(2),
            connect_timeout=1,
            read_timeout=1,
            policy=LOOPBACK,
            redis_url="",
        )


# --- API ------------------------------------------------------------------------------


def create(api: APIClient, payload: dict[str, Any]) -> Any:
    return api.post(f"{API}/endpoints", data=json.dumps(payload), content_type="application/json")


def patch(api: APIClient, endpoint_id: str, payload: dict[str, Any]) -> Any:
    return api.patch(
        f"{API}/endpoints/{endpoint_id}",
        data=json.dumps(payload),
        content_type="application/json",
    )


@pytest.mark.django_db
def test_the_api_takes_the_secret_and_never_returns_it(api: APIClient) -> None:
    auth = {
        "type": "oauth2_client_credentials",
        "token_url": "https://1.1.1.1/oauth/token",
        "client_id": "cid",
        "client_secret": "the-client-secret",
        "scope": "a b",
    }
    created = create(api, {"url": "https://1.1.1.1/hook", "event_types": ["*"], "auth": auth})
    assert created.status_code == 201, created.content
    assert "the-client-secret" not in created.content.decode()
    assert created.json()["auth"] == {
        "type": "oauth2_client_credentials",
        "token_url": "https://1.1.1.1/oauth/token",
        "client_id": "cid",
        "scope": "a b",
    }
    endpoint_id = created.json()["id"]
    endpoint = Endpoint.objects.get(pk=endpoint_id)
    assert "the-client-secret" not in endpoint.encrypted_auth_secret
    assert "the-client-secret" not in json.dumps(endpoint.auth)

    read = api.get(f"{API}/endpoints/{endpoint_id}")
    assert "the-client-secret" not in read.content.decode()
    listed = api.get(f"{API}/endpoints")
    assert "the-client-secret" not in listed.content.decode()

    # Left out on an update (same token origin): the stored secret is kept.
    same = patch(api, endpoint_id, {"auth": {**auth, "client_secret": None, "scope": "c"}})
    assert same.status_code == 200, same.content
    endpoint.refresh_from_db()
    credentials = endpoint.oauth2_credentials()
    assert credentials is not None
    assert (credentials.client_secret, credentials.scope) == ("the-client-secret", "c")

    # A token URL at another origin never gets the stored secret.
    moved = {**auth, "token_url": "https://8.8.8.8/token"}
    del moved["client_secret"]
    refused = patch(api, endpoint_id, {"auth": moved})
    assert refused.status_code == 400
    assert "another origin" in refused.json()["auth"][0]

    cleared = patch(api, endpoint_id, {"auth": None})
    assert cleared.status_code == 200
    endpoint.refresh_from_db()
    assert endpoint.auth is None
    assert endpoint.encrypted_auth_secret == ""


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        ({"type": "basic"}, '"type" must be "oauth2_client_credentials"'),
        (
            {"type": "oauth2_client_credentials", "token_url": "https://1.1.1.1/t"},
            'Give "client_id"',
        ),
        (
            {
                "type": "oauth2_client_credentials",
                "token_url": "https://1.1.1.1/t",
                "client_id": "c",
            },
            'Give "client_secret"',
        ),
        (
            {
                "type": "oauth2_client_credentials",
                "token_url": "https://169.254.169.254/latest",
                "client_id": "c",
                "client_secret": "s",
            },
            "token_url: 169.254.169.254 is a link-local address",
        ),
        (
            {
                "type": "oauth2_client_credentials",
                "token_url": "https://1.1.1.1/t",
                "client_id": "c",
                "client_secret": "s",
                "grant": "x",
            },
            "Unknown fields grant",
        ),
        ("token", "Give null or an object"),
    ],
)
@pytest.mark.django_db
def test_bad_auth_is_a_400_naming_the_problem(api: APIClient, auth: Any, message: str) -> None:
    response = create(api, {"url": "https://1.1.1.1/hook", "event_types": ["*"], "auth": auth})
    assert response.status_code == 400, response.content
    assert any(message in problem for problem in response.json()["auth"]), response.json()
    assert not Endpoint.objects.exists()


def test_lifetime_keeps_a_margin() -> None:
    assert oauth2._lifetime(3600) == 3540
    assert oauth2._lifetime(10) == 9
    assert oauth2._lifetime(None) == oauth2.DEFAULT_LIFETIME_SECONDS - 30
    assert oauth2._lifetime("120") == 108


def test_settings_default_has_no_proxy() -> None:
    assert conf.egress().proxy_url == ""


@pytest.mark.django_db
def test_oauth2_never_follows_the_url_to_another_origin(api: APIClient) -> None:
    auth = {
        "type": "oauth2_client_credentials",
        "token_url": "https://1.1.1.1/oauth/token",
        "client_id": "cid",
        "client_secret": "the-client-secret",
    }
    created = create(api, {"url": "https://1.1.1.1/hook", "event_types": ["*"], "auth": auth})
    endpoint_id = created.json()["id"]

    same = patch(api, endpoint_id, {"url": "https://1.1.1.1/other"})
    assert same.json()["auth"] is not None
    assert same.json()["notices"] == []

    kept_out = {**auth}
    del kept_out["client_secret"]
    refused = patch(api, endpoint_id, {"url": "https://8.8.8.8/hook", "auth": kept_out})
    assert refused.status_code == 400
    assert "where the stored secret's tokens are not sent" in refused.json()["auth"][0]

    moved = patch(api, endpoint_id, {"url": "https://8.8.8.8/hook"})
    assert moved.status_code == 200, moved.content
    assert moved.json()["auth"] is None
    assert "OAuth2 delivery auth was removed" in moved.json()["notices"][0]
    endpoint = Endpoint.objects.get(pk=endpoint_id)
    assert endpoint.encrypted_auth_secret == ""

    given = patch(api, endpoint_id, {"url": "https://9.9.9.9/hook", "auth": auth})
    assert given.status_code == 200
    assert given.json()["auth"]["client_id"] == "cid"


@pytest.mark.django_db
def test_the_probe_of_a_suspended_endpoint_carries_the_token(
    receiver: Receiver, token_server: TokenServer, redis_client: Any
) -> None:
    redis_client.flushdb()
    receiver.handler = checking_bearer(token_server)
    endpoint = make(receiver, token_server)
    services.endpoint_suspend(endpoint_id=endpoint.pk, reason="failures")
    assert services.endpoint_test_now(endpoint_id=endpoint.pk).succeeded
    assert receiver.requests[0].headers["Authorization"] == "Bearer tok-1"

    token_server.failure = (500, b"")
    redis_client.flushdb()
    failed = services.endpoint_test_now(endpoint_id=endpoint.pk)
    assert failed.failure == "no OAuth2 token (the token endpoint failed)"


def test_no_error_we_store_holds_a_credential_of_a_url(
    celery_worker: object, receiver: Receiver, token_server: TokenServer
) -> None:
    # The token URL's query quoted by a token request that failed; the endpoint's by no
    # error of a connection refused.
    token_server.failure = (503, b'{"error": "temporarily_unavailable"}')
    services.endpoint_create(
        url=receiver.url,
        event_types=["invoice.paid"],
        auth=auth_of(token_server, token_url=f"{token_server.url}?key=tu-s3cret"),
        **FAST_POLICY,
    )
    with Receiver.running() as gone:
        closed = f"{gone.url}?token=ep-s3cret"
    services.endpoint_create(url=closed, event_types=["invoice.paid"], **FAST_POLICY)
    services.emit("invoice.paid", {"invoice": "in_1"})

    wait_until(
        lambda: Delivery.objects.exclude(last_error="").count() == 2, what="two failed attempts"
    )
    texts = [*Attempt.objects.values_list("error", flat=True)]
    texts += Delivery.objects.values_list("last_error", flat=True)
    assert any("/oauth/token?key=***" in text for text in texts), texts
    for text in texts:
        assert "tu-s3cret" not in text
        assert "ep-s3cret" not in text
