"""Broker destinations end to end: an endpoint whose URL names RabbitMQ, NATS
JetStream or a Redis stream, made through the API, gets its events from the real Celery
worker; a consumer on the real server reads the message and verifies it with the
official `standardwebhooks` library over exactly the bytes and headers it got.

Needs RabbitMQ (guest/guest) on 127.0.0.1:5672 and NATS with JetStream on 4222 (.ci/run
starts them); the destination stream lives in Redis db 7, away from the test broker.
"""

import asyncio
import json
import logging
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import amqp
import nats
import pytest
import redis
from django.utils import timezone
from nats.js.api import StreamConfig
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook

from deliveries import services
from deliveries.destinations import for_url
from deliveries.destinations.base import Credentials, Kind
from deliveries.endpoints.headers import MASK
from deliveries.models import Attempt, Delivery, DeliveryStatus, Endpoint, Event
from deliveries.pipeline.wire import build_headers, render_body
from tests.conftest import wait_until
from tests.fixtures import MESSAGE_HEADERS
from webhooks_core.crypto import encryption
from webhooks_core.egress import deadlines

# Events are fanned out by the emitting process (no worker runs here).
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.needs("rabbitmq", "nats"),
    pytest.mark.usefixtures("inline_fan_out"),
]

API = "/api/v1"
AMQP = "127.0.0.1:5672"
NATS = "nats://127.0.0.1:4222"
REDIS_DB = 7
FAST: dict[str, Any] = {
    "backoff_base_seconds": 0.05,
    "backoff_max_seconds": 0.2,
    "connect_timeout_seconds": 1.0,
    "read_timeout_seconds": 2.0,
}


def create(api: APIClient, url: str, **fields: Any) -> Any:
    payload = {"url": url, "event_types": ["*"], **FAST, **fields}
    return api.post(f"{API}/endpoints", data=json.dumps(payload), content_type="application/json")


def created(api: APIClient, url: str, **fields: Any) -> dict[str, Any]:
    response = create(api, url, **fields)
    assert response.status_code == 201, response.content
    result: dict[str, Any] = json.loads(response.content)
    return result


def settled(event: Event, status: str) -> bool:
    return Delivery.objects.filter(event=event, status=status).exists()


def verified(secret: str, body: bytes, headers: dict[str, str], event: Event) -> None:
    """What a webhook receiver would check, on what the consumer got."""
    payload = Webhook(secret).verify(body, headers)
    assert payload["id"] == str(event.id)
    assert set(headers) >= MESSAGE_HEADERS
    assert headers["X-Webhook-Id"] == headers["webhook-id"] == str(event.id)
    assert headers["X-Webhook-Event"] == event.type
    assert headers["Content-Type"] == "application/json"
    # The very body an HTTP receiver would get: same renderer, same bytes.
    delivery = Delivery.objects.select_related("event", "endpoint").get(event=event)
    assert body == render_body(delivery.event, delivery.endpoint)


# --- RabbitMQ ----------------------------------------------------------------------------


@pytest.fixture
def rabbit() -> Iterator[tuple[amqp.Channel, str, str]]:
    """A direct exchange with one durable queue bound to routing key `hooks`."""
    name = f"whtest.{uuid.uuid4().hex[:10]}"
    connection = amqp.Connection(host=AMQP, userid="guest", password="guest")
    connection.connect()
    channel = connection.channel()
    channel.exchange_declare(name, "direct", durable=False, auto_delete=False)
    channel.queue_declare(name, durable=True, auto_delete=False)
    channel.queue_bind(name, name, "hooks")
    yield channel, name, name
    channel.queue_delete(name)
    channel.exchange_delete(name)
    connection.close()


def test_amqp_end_to_end_through_the_api(
    celery_worker: object, api: APIClient, rabbit: tuple[amqp.Channel, str, str]
) -> None:
    channel, exchange, queue = rabbit
    url = f"amqp://guest:guest@{AMQP}/?exchange={exchange}&routing_key=hooks"
    answer = created(api, url)
    # The password is stored encrypted and shown masked, everywhere the URL is read.
    masked = f"amqp://guest:***@{AMQP}/?exchange={exchange}&routing_key=hooks"
    assert answer["url"] == masked
    endpoint = Endpoint.objects.get(pk=answer["id"])
    assert endpoint.url == masked
    assert encryption.decrypt(endpoint.url_password) == "guest"
    assert json.loads(api.get(f"{API}/endpoints/{endpoint.pk}").content)["url"] == masked

    event = services.emit("invoice.paid", {"invoice": "in_amqp", "amount": 1})
    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="published and confirmed")

    message = channel.basic_get(queue, no_ack=True)
    assert message is not None
    headers = {str(k): str(v) for k, v in (message.headers or {}).items()}
    body = message.body
    assert isinstance(body, bytes)
    verified(answer["secret"], body, headers, event)
    assert message.properties["delivery_mode"] == 2  # persistent
    assert message.properties["message_id"] == str(event.id)
    [attempt] = Attempt.objects.filter(delivery__event=event)
    assert "confirmed" in attempt.response_body
    assert attempt.request_headers["webhook-signature"] == MASK


def test_amqp_unknown_exchange_is_a_refusal(celery_worker: object, api: APIClient) -> None:
    answer = created(api, f"amqp://guest:guest@{AMQP}/?exchange=no-such-{uuid.uuid4().hex}")
    event = services.emit("invoice.paid", {"n": 1})
    wait_until(lambda: settled(event, DeliveryStatus.DEAD_LETTERED), what="dead-lettered")
    delivery = Delivery.objects.get(event=event, endpoint_id=answer["id"])
    assert delivery.attempts == 1
    assert "no exchange" in delivery.attempt_set.get().error


def test_amqp_wrong_password_is_a_refusal(celery_worker: object, api: APIClient) -> None:
    created(api, f"amqp://guest:wrong@{AMQP}/?exchange=amq.direct")
    event = services.emit("invoice.paid", {"n": 1})
    wait_until(lambda: settled(event, DeliveryStatus.DEAD_LETTERED), what="dead-lettered")
    [attempt] = Attempt.objects.filter(delivery__event=event)
    assert "access refused" in attempt.error.lower()
    assert "wrong" not in attempt.error


def test_amqp_unroutable_message_is_retried(
    celery_worker: object, api: APIClient, rabbit: tuple[amqp.Channel, str, str]
) -> None:
    _, exchange, _ = rabbit
    created(api, f"amqp://{AMQP}/?exchange={exchange}&routing_key=nobody", max_attempts=2)
    event = services.emit("invoice.paid", {"n": 1})
    wait_until(lambda: settled(event, DeliveryStatus.DEAD_LETTERED), what="dead-lettered")
    errors = list(Attempt.objects.filter(delivery__event=event).values_list("error", flat=True))
    assert len(errors) == 2
    assert all("NO_ROUTE" in error for error in errors)


# --- NATS JetStream ----------------------------------------------------------------------


def _nats(coroutine_factory: Any) -> Any:
    async def run() -> Any:
        client = await nats.connect(NATS)
        try:
            return await coroutine_factory(client.jetstream())
        finally:
            await client.close()

    return asyncio.run(run())


@pytest.fixture
def stream() -> Iterator[tuple[str, str]]:
    name = f"WHTEST_{uuid.uuid4().hex[:10]}"
    subject = f"whtest.{name.lower()}.hooks"

    async def add(js: Any) -> None:
        await js.add_stream(StreamConfig(name=name, subjects=[subject], duplicate_window=60.0))

    async def delete(js: Any) -> None:
        await js.delete_stream(name)

    _nats(add)
    yield name, subject
    _nats(delete)


def stream_messages(name: str) -> list[Any]:
    async def read(js: Any) -> list[Any]:
        info = await js.stream_info(name)
        return [await js.get_msg(name, seq) for seq in range(1, info.state.last_seq + 1)]

    return list(_nats(read))


def test_nats_end_to_end_through_the_api(
    celery_worker: object, api: APIClient, stream: tuple[str, str]
) -> None:
    name, subject = stream
    answer = created(api, f"nats://127.0.0.1:4222?subject={subject}")
    event = services.emit("invoice.paid", {"invoice": "in_nats"})
    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="acknowledged by the stream")

    [message] = stream_messages(name)
    headers = dict(message.headers)
    assert headers["Nats-Msg-Id"] == str(event.id)
    verified(answer["secret"], message.data, headers, event)
    [attempt] = Attempt.objects.filter(delivery__event=event)
    assert f"stream {name} seq 1" in attempt.response_body


def test_nats_duplicate_window_drops_a_retry_copy(stream: tuple[str, str]) -> None:
    """A retry after a lost acknowledgement sends the same Nats-Msg-Id: one copy kept."""
    name, subject = stream
    endpoint, _ = services.endpoint_create(
        url=f"nats://127.0.0.1:4222?subject={subject}", event_types=["*"], **FAST
    )
    event = services.emit("invoice.paid", {"n": 1})
    delivery = Delivery.objects.select_related("event", "endpoint").get(event=event)
    secrets = [s.value for s in endpoint.secrets.all()]
    credentials = Credentials(secrets, [], int(timezone.now().timestamp()))
    destination = for_url(endpoint.url)
    first = destination.send(delivery, deadlines.after(3), credentials)
    again = destination.send(delivery, deadlines.after(3), credentials)

    assert first.kind == again.kind == Kind.SUCCEEDED
    assert "duplicate" not in first.response_body
    assert "duplicate" in again.response_body
    assert len(stream_messages(name)) == 1


def test_nats_subject_without_stream_is_a_refusal(celery_worker: object, api: APIClient) -> None:
    created(api, f"nats://127.0.0.1:4222?subject=whtest.nobody.{uuid.uuid4().hex}")
    event = services.emit("invoice.paid", {"n": 1})
    wait_until(lambda: settled(event, DeliveryStatus.DEAD_LETTERED), what="dead-lettered")
    [attempt] = Attempt.objects.filter(delivery__event=event)
    assert "no JetStream stream" in attempt.error


# --- Redis Streams -----------------------------------------------------------------------


@pytest.fixture
def destination_redis() -> Iterator[redis.Redis]:
    client = redis.Redis(host="127.0.0.1", port=6379, db=REDIS_DB)
    client.flushdb()
    yield client
    client.flushdb()


def stream_entries(client: Any, stream: str) -> list[tuple[str, bytes, dict[str, str]]]:
    """(entry id, the `body` field, the other fields as headers) of each entry."""
    entries = []
    for entry_id, fields in client.xrange(stream):
        body = fields.pop(b"body")
        headers = {k.decode(): v.decode("latin-1") for k, v in fields.items()}
        entries.append((entry_id.decode(), body, headers))
    return entries


def test_redis_stream_end_to_end_through_the_api(
    celery_worker: object, api: APIClient, destination_redis: redis.Redis
) -> None:
    answer = created(api, f"redis://127.0.0.1:6379/{REDIS_DB}?stream=hooks&maxlen=1000")
    event = services.emit("invoice.paid", {"invoice": "in_redis"})
    wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="added to the stream")

    [(entry_id, body, headers)] = stream_entries(destination_redis, "hooks")
    verified(answer["secret"], body, headers, event)
    [attempt] = Attempt.objects.filter(delivery__event=event)
    assert entry_id in attempt.response_body


def test_redis_password_is_masked_everywhere(
    celery_worker: object,
    api: APIClient,
    destination_redis: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    user, password = f"whtest-{uuid.uuid4().hex[:8]}", f"pw-{uuid.uuid4().hex}"
    destination_redis.acl_setuser(
        user, enabled=True, passwords=[f"+{password}"], keys=["*"], commands=["+@all"]
    )
    try:
        caplog.set_level(logging.DEBUG)
        url = f"redis://{user}:{password}@127.0.0.1:6379/{REDIS_DB}?stream=private"
        answer = created(api, url)
        event = services.emit("invoice.paid", {"n": 1})
        wait_until(lambda: settled(event, DeliveryStatus.SUCCEEDED), what="sent with the ACL user")
        assert destination_redis.xlen("private") == 1

        endpoint = Endpoint.objects.get(pk=answer["id"])
        reads = [
            json.dumps(answer),
            api.get(f"{API}/endpoints/{endpoint.pk}").content.decode(),
            api.get(f"{API}/endpoints").content.decode(),
            api.get(f"{API}/deliveries?endpoint={endpoint.pk}").content.decode(),
            endpoint.url,
            json.dumps(list(Attempt.objects.values("request_headers", "error", "response_body"))),
            caplog.text,
        ]
        for text in reads:
            assert password not in text
        assert f"{user}:***@" in answer["url"]

        # Sending back what a read shows keeps the password; on another port it must be
        # given again (a credential never follows the URL elsewhere).
        patched = api.patch(
            f"{API}/endpoints/{endpoint.pk}",
            data=json.dumps({"url": answer["url"], "description": "same"}),
            content_type="application/json",
        )
        assert patched.status_code == 200, patched.content
        endpoint.refresh_from_db()
        assert encryption.decrypt(endpoint.url_password) == password
        moved = answer["url"].replace(":6379", ":6380")
        refused = api.patch(
            f"{API}/endpoints/{endpoint.pk}",
            data=json.dumps({"url": moved}),
            content_type="application/json",
        )
        assert refused.status_code == 400
        assert "password" in json.loads(refused.content)["url"][0]
    finally:
        destination_redis.acl_deluser(user)


def test_redis_wrong_password_is_a_refusal(
    celery_worker: object, api: APIClient, destination_redis: redis.Redis
) -> None:
    created(api, f"redis://nobody-{uuid.uuid4().hex[:6]}:nope@127.0.0.1:6379/7?stream=x")
    event = services.emit("invoice.paid", {"n": 1})
    wait_until(lambda: settled(event, DeliveryStatus.DEAD_LETTERED), what="dead-lettered")
    [attempt] = Attempt.objects.filter(delivery__event=event)
    assert "Redis" in attempt.error
    assert "nope" not in attempt.error


# --- a broker that is down: retried, then dead-lettered, as an HTTP 5xx ------------------


@pytest.mark.parametrize(
    "url",
    [
        "amqp://guest:guest@127.0.0.1:1/?exchange=x",
        "nats://127.0.0.1:1?subject=x",
        "redis://127.0.0.1:1/0?stream=x",
    ],
    ids=["amqp", "nats", "redis"],
)
def test_a_broker_that_is_down_is_retried_then_dead_lettered(
    celery_worker: object, api: APIClient, url: str
) -> None:
    created(api, url, max_attempts=3)
    event = services.emit("invoice.paid", {"n": 1})
    wait_until(lambda: settled(event, DeliveryStatus.DEAD_LETTERED), what="dead-lettered")
    attempts = list(Attempt.objects.filter(delivery__event=event).order_by("number"))
    assert [a.number for a in attempts] == [1, 2, 3]
    assert all("unreachable" in a.error for a in attempts)
    assert all(a.response_status is None for a in attempts)
    # The headers it would have carried are recorded, their signatures redacted.
    assert attempts[0].request_headers["webhook-signature"] == MASK


# --- the same headers as HTTP ------------------------------------------------------------


def test_broker_messages_carry_the_http_wire_headers(destination_redis: redis.Redis) -> None:
    endpoint, secret = services.endpoint_create(
        url=f"redis://127.0.0.1:6379/{REDIS_DB}?stream=same",
        event_types=["*"],
        custom_headers={"X-Tenant-Key": "abc", "X-Plain": "1"},
        **FAST,
    )
    event = services.emit("invoice.paid", {"n": 1})
    delivery = Delivery.objects.select_related("event", "endpoint").get(event=event)
    timestamp = int(timezone.now().timestamp())
    outcome = for_url(endpoint.url).send(
        delivery, deadlines.after(3), Credentials([secret], [], timestamp)
    )
    assert outcome.kind == Kind.SUCCEEDED, outcome.error
    [(_, body, got)] = stream_entries(destination_redis, "same")
    assert got == build_headers(delivery, body, [secret], timestamp)
    assert got["X-Tenant-Key"] == "abc"


# --- what the API refuses ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("amqp://127.0.0.1:5672/", "?exchange="),
        ("amqp://127.0.0.1:5672/?routing_key=a", "?exchange="),
        ("nats://127.0.0.1:4222", "?subject="),
        ("nats://127.0.0.1:4222?subject=a.*", "wildcards"),
        ("redis://127.0.0.1:6379/0", "?stream="),
        ("redis://127.0.0.1:6379/0?stream=s&maxlen=0", "maxlen"),
        ("redis://127.0.0.1:6379/0?stream=s&maxlenn=5", "not 'maxlenn'"),
        ("http://user:pw@127.0.0.1:8000/hooks", "user info"),
        ("amqp://guest:***@127.0.0.1:5672/?exchange=x", "give the real password"),
        ("ftp://127.0.0.1/x", "Only http, https, amqp"),
    ],
)
def test_bad_broker_urls_are_a_clear_400(api: APIClient, url: str, says: str) -> None:
    response = create(api, url)
    assert response.status_code == 400, response.content
    assert says in " ".join(json.loads(response.content)["url"])
    assert not Endpoint.objects.exists()


def test_the_ssrf_rules_apply_to_the_brokers_address(api: APIClient, settings: Any) -> None:
    settings.WEBHOOKS_ALLOWED_NETWORKS = ""
    response = create(api, "amqp://guest:guest@127.0.0.1:5672/?exchange=x")
    assert response.status_code == 400
    assert "loopback" in json.loads(response.content)["url"][0]
    assert b"guest:guest" not in response.content
    response = create(api, "redis://10.1.2.3:6379/0?stream=s")
    assert response.status_code == 400
    assert "private" in json.loads(response.content)["url"][0]


def test_require_https_governs_http_urls_only(api: APIClient, settings: Any) -> None:
    settings.WEBHOOKS_REQUIRE_HTTPS = True
    assert create(api, "http://127.0.0.1:8000/hooks").status_code == 400
    assert create(api, f"redis://127.0.0.1:6379/{REDIS_DB}?stream=s").status_code == 201


# --- one pool per broker per process; a broken idle connection is replaced ---------------


def _idle_connections(pool: Any) -> list[Any]:
    return [c for connections in pool._idle.values() for c in connections]


@pytest.mark.parametrize("kind", ["amqp", "nats"])
def test_a_broken_idle_connection_is_replaced_within_the_attempt(
    kind: str, rabbit: tuple[amqp.Channel, str, str], stream: tuple[str, str]
) -> None:
    from deliveries.destinations import amqp as amqp_kind
    from deliveries.destinations import nats as nats_kind

    _, exchange, _ = rabbit
    _, subject = stream
    kinds: dict[str, tuple[str, Any]] = {
        "amqp": (
            f"amqp://guest:guest@{AMQP}/?exchange={exchange}&routing_key=hooks",
            amqp_kind._pool,
        ),
        "nats": (f"nats://127.0.0.1:4222?subject={subject}", nats_kind._pool),
    }
    url, pool = kinds[kind]
    pool.clear()
    endpoint, secret = services.endpoint_create(url=url, event_types=["*"], **FAST)
    destination = for_url(endpoint.url)
    outcomes = []
    for n in range(3):
        event = services.emit("invoice.paid", {"n": n})
        delivery = Delivery.objects.select_related("event", "endpoint").get(event=event)
        credentials = Credentials([secret], [], int(timezone.now().timestamp()))
        outcomes.append(destination.send(delivery, deadlines.after(3), credentials))
        # Reused, not one connection per delivery.
        [idle] = _idle_connections(pool)
        if n == 1:
            # The broker went away under the idle connection (a restart, a dropped route).
            sock = idle.transport.sock if kind == "amqp" else idle.sock
            sock.shutdown(socket.SHUT_RDWR)
    assert [o.kind for o in outcomes] == [Kind.SUCCEEDED] * 3, [o.error for o in outcomes]


# --- the Procfile's delivery worker: Celery's gevent pool --------------------------------


@pytest.mark.worker
def test_a_gevent_worker_delivers_to_every_broker_kind(
    redis_client: Any,
    rabbit: tuple[amqp.Channel, str, str],
    stream: tuple[str, str],
    destination_redis: redis.Redis,
) -> None:
    """The synchronous clients cooperate under gevent's monkey-patching: many deliveries
    in flight at once, each kind on a few pooled connections."""
    from tests.helpers import worker_process

    redis_client.flushdb()
    channel, exchange, queue = rabbit
    name, subject = stream
    count = 20
    for url in (
        f"amqp://guest:guest@{AMQP}/?exchange={exchange}&routing_key=hooks",
        f"nats://127.0.0.1:4222?subject={subject}",
        f"redis://127.0.0.1:6379/{REDIS_DB}?stream=gevent",
    ):
        services.endpoint_create(url=url, event_types=["*"], max_in_flight=10, **FAST)
    for n in range(count):
        services.emit("invoice.paid", {"n": n})

    with worker_process({}, pool="gevent", concurrency=50):
        wait_until(
            lambda: Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count() == 3 * count,
            timeout=60,
            what="every delivery to every broker",
        )
    declared: Any = channel.queue_declare(queue, passive=True)
    assert declared.message_count == count
    assert len(stream_messages(name)) == count
    assert destination_redis.xlen("gevent") == count
    assert not Attempt.objects.exclude(error="").exists()


# --- the admin, and the test event of a suspended endpoint -------------------------------


def test_the_admin_makes_a_broker_endpoint_and_shows_its_url_masked(
    client: Any, destination_redis: redis.Redis
) -> None:
    from django.contrib.auth.models import User

    from tests.deliveries.admin.helpers import endpoint_form

    User.objects.create_superuser("op", "op@example.com", "pw")
    client.login(username="op", password="pw")
    password = f"adminpw-{uuid.uuid4().hex}"
    url = f"redis://:{password}@127.0.0.1:6379/{REDIS_DB}?stream=admin"
    response = client.post("/admin/deliveries/endpoint/add/", endpoint_form(url=url))
    assert response.status_code == 200, response.content[:300]
    assert password.encode() not in response.content
    endpoint = Endpoint.objects.get()
    assert endpoint.url == f"redis://:***@127.0.0.1:6379/{REDIS_DB}?stream=admin"
    assert encryption.decrypt(endpoint.url_password) == password
    for page in (
        "/admin/deliveries/endpoint/",
        f"/admin/deliveries/endpoint/{endpoint.pk}/change/",
    ):
        content = client.get(page).content.decode()
        assert "127.0.0.1:6379" in content
        assert password not in content
    # Saving the change form as shown (the masked URL) keeps the password.
    saved = client.post(
        f"/admin/deliveries/endpoint/{endpoint.pk}/change/",
        endpoint_form(url=endpoint.url, description="kept"),
    )
    assert saved.status_code == 302, saved.content[:500]
    endpoint.refresh_from_db()
    assert endpoint.description == "kept"
    assert encryption.decrypt(endpoint.url_password) == password
    missing = client.post("/admin/deliveries/endpoint/add/", endpoint_form(url="nats://127.0.0.1"))
    assert "?subject=" in missing.content.decode()


def test_a_suspended_broker_endpoint_takes_a_test_event(destination_redis: redis.Redis) -> None:
    endpoint, secret = services.endpoint_create(
        url=f"redis://127.0.0.1:6379/{REDIS_DB}?stream=probe", event_types=["*"], **FAST
    )
    services.endpoint_suspend(endpoint_id=endpoint.pk, reason="failing")
    result = services.endpoint_test_now(endpoint_id=endpoint.pk, requested_by="tests")
    assert result.succeeded, result.failure
    [(_, body, headers)] = stream_entries(destination_redis, "probe")
    Webhook(secret).verify(body, headers)
    endpoint.refresh_from_db()
    assert endpoint.test_succeeded_at is not None

    down, _ = services.endpoint_create(url="redis://127.0.0.1:1/0?stream=x", event_types=["*"])
    services.endpoint_suspend(endpoint_id=down.pk, reason="failing")
    failed = services.endpoint_test_now(endpoint_id=down.pk)
    assert not failed.succeeded
    assert "unreachable" in failed.failure


# --- tracing: a producer span per attempt, its traceparent in the message ----------------


def test_a_broker_attempt_is_a_producer_span_whose_traceparent_the_message_carries(
    destination_redis: redis.Redis,
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    from webhooks_core import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    try:
        endpoint, secret = services.endpoint_create(
            url=f"redis://127.0.0.1:6379/{REDIS_DB}?stream=traced", event_types=["*"], **FAST
        )
        event = services.emit("invoice.paid", {"n": 1})
        delivery = Delivery.objects.select_related("event", "endpoint").get(event=event)
        credentials = Credentials([secret], [], int(timezone.now().timestamp()))
        outcome = for_url(endpoint.url).send(delivery, deadlines.after(3), credentials)
    finally:
        tracing.use_provider(None)
        provider.shutdown()
    assert outcome.kind == Kind.SUCCEEDED
    [span] = [s for s in exporter.get_finished_spans() if s.name == "send traced"]
    assert span.kind == SpanKind.PRODUCER
    attributes = dict(span.attributes or {})
    assert attributes["messaging.system"] == "redis"
    assert attributes["messaging.destination.name"] == "traced"
    assert attributes["webhooks.event.id"] == str(event.id)
    [(_, body, headers)] = stream_entries(destination_redis, "traced")
    context = span.get_span_context()
    assert context is not None
    assert headers["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
    Webhook(secret).verify(body, headers)


def test_after_a_refusal_the_next_message_goes_out_on_a_sound_connection(
    rabbit: tuple[amqp.Channel, str, str],
) -> None:
    from deliveries.destinations import amqp as amqp_kind

    channel, exchange, queue = rabbit
    amqp_kind._pool.clear()
    good, secret = services.endpoint_create(
        url=f"amqp://guest:guest@{AMQP}/?exchange={exchange}&routing_key=hooks",
        event_types=["*"],
        **FAST,
    )
    bad, _ = services.endpoint_create(
        url=f"amqp://guest:guest@{AMQP}/?exchange=missing-{uuid.uuid4().hex}",
        event_types=["*"],
        **FAST,
    )
    event = services.emit("invoice.paid", {"n": 1})
    credentials = Credentials([secret], [], int(timezone.now().timestamp()))
    kinds = []
    for endpoint in (good, bad, good):
        delivery = Delivery.objects.select_related("event", "endpoint").get(
            event=event, endpoint=endpoint
        )
        idle = _idle_connections(amqp_kind._pool)
        sockets = [connection.transport.sock for connection in idle]
        kinds.append(for_url(endpoint.url).send(delivery, deadlines.after(3), credentials).kind)
        if endpoint == bad:
            # The refused one's connection (the broker closed its channel) is closed,
            # not kept and not left open.
            assert _idle_connections(amqp_kind._pool) == []
            assert [sock.fileno() for sock in sockets] == [-1]
        else:
            assert len(_idle_connections(amqp_kind._pool)) == 1
    assert kinds == [Kind.SUCCEEDED, Kind.DEAD, Kind.SUCCEEDED]
    declared: Any = channel.queue_declare(queue, passive=True)
    assert declared.message_count == 2


# --- the deadline: a broker that takes the connection and never answers ------------------


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A listening socket that never accepts nor answers: the kernel completes the
    handshake, then nothing comes back."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield server.getsockname()[1]
    server.close()


@pytest.mark.parametrize(
    "template",
    [
        "amqp://guest:guest@127.0.0.1:{port}/?exchange=x",
        "nats://127.0.0.1:{port}?subject=x",
        "redis://127.0.0.1:{port}/0?stream=x",
    ],
    ids=["amqp", "nats", "redis"],
)
def test_a_silent_broker_costs_one_deadline_and_is_a_retry(template: str, silent_port: int) -> None:
    endpoint, secret = services.endpoint_create(
        url=template.format(port=silent_port),
        event_types=["*"],
        connect_timeout_seconds=0.5,
        read_timeout_seconds=0.5,
    )
    event = services.emit("invoice.paid", {"n": 1})
    delivery = Delivery.objects.select_related("event", "endpoint").get(event=event)
    credentials = Credentials([secret], [], int(timezone.now().timestamp()))
    began = time.monotonic()
    outcome = for_url(endpoint.url).send(delivery, deadlines.after(1.0), credentials)
    took = time.monotonic() - began
    assert outcome.kind == Kind.RETRY
    assert outcome.no_answer  # like an HTTP timeout: counts against the endpoint's health
    assert 0.9 < took < 2.5, took
