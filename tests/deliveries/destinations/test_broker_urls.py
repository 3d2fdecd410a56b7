"""The broker URL rules (deliveries/destinations/broker_urls.py): pure logic, no sockets."""

import pytest

from deliveries.destinations import broker_urls
from webhooks_core.egress.ssrf import AddressPolicy, parse_networks

LOOPBACK = AddressPolicy(allowed_networks=parse_networks("127.0.0.0/8"))


def test_parse_gives_each_part_with_the_defaults() -> None:
    amqp = broker_urls.parse("amqps://us%40er:p%2Fw@Broker.Example:5999/prod?exchange=e")
    assert (amqp.scheme, amqp.host, amqp.port, amqp.tls) == ("amqps", "broker.example", 5999, True)
    assert (amqp.username, amqp.password, amqp.path) == ("us@er", "p/w", "prod")
    assert amqp.params == {"exchange": "e"}
    assert broker_urls.parse("amqp://h?exchange=e").path == "/"
    assert broker_urls.parse("amqp://h/%2F?exchange=e").path == "/"
    assert broker_urls.parse("amqp://h?exchange=e").port == 5672
    assert broker_urls.parse("nats://h?subject=a.b").port == 4222
    redis = broker_urls.parse("rediss://:secret@h/3?stream=s&maxlen=10")
    assert (redis.port, redis.path, redis.password, redis.tls) == (6379, "3", "secret", True)


@pytest.mark.parametrize(
    "url",
    [
        "amqp://h/?exchange=",
        "amqp://h/?exchange=e&exchange=f",
        "amqp://h/?exchange=e#frag",
        "amqp://a@b@h/?exchange=e",
        "amqp://h\\@x/?exchange=e",
        "amqp:// h/?exchange=e",
        "nats://h/path?subject=a",
        "nats://h?subject=a..b",
        "nats://h?subject=a.>",
        "redis://h/x?stream=s",
        "redis://h/0?stream=s&maxlen=-1",
        "redis://:99999999/0?stream=s",
    ],
)
def test_malformed_broker_urls_are_refused(url: str) -> None:
    with pytest.raises(broker_urls.BrokerURLInvalid):
        broker_urls.parse(url)


def test_the_password_leaves_the_url_and_comes_back_for_the_wire() -> None:
    masked, password = broker_urls.split_password("amqp://guest:g%40st@h:5672/v?exchange=e")
    assert masked == "amqp://guest:***@h:5672/v?exchange=e"
    assert password == "g@st"
    assert broker_urls.has_masked_password(masked)
    back = broker_urls.with_password(masked, password)
    assert broker_urls.parse(back).password == "g@st"
    assert broker_urls.split_password("nats://h?subject=a") == ("nats://h?subject=a", "")
    assert broker_urls.masked("redis://:pw@h/0?stream=s") == "redis://:***@h/0?stream=s"


def test_the_address_passes_the_ssrf_guard() -> None:
    assert broker_urls.refusal("amqp://127.0.0.1/?exchange=e", LOOPBACK) is None
    refusal = broker_urls.refusal("amqp://127.0.0.1/?exchange=e", AddressPolicy())
    assert refusal is not None
    assert "loopback" in refusal
    named = AddressPolicy(resolver=lambda host, port: ["10.0.0.5"])
    refusal = broker_urls.refusal("nats://queue.internal?subject=a", named)
    assert refusal is not None
    assert "queue.internal resolves to 10.0.0.5 is a private address" in refusal
    public = AddressPolicy(resolver=lambda host, port: ["93.184.216.34"])
    assert broker_urls.refusal("nats://queue.example?subject=a", public) is None
    with pytest.raises(ValueError, match="private"):
        broker_urls.checked_address(broker_urls.parse("nats://q.x?subject=a"), named)


def test_only_http_and_the_broker_schemes_are_endpoint_urls() -> None:
    refusal = broker_urls.endpoint_url_refusal("ftp://127.0.0.1/", LOOPBACK)
    assert refusal is not None
    assert "amqp" in refusal
    assert broker_urls.endpoint_url_refusal("https://user:pw@127.0.0.1/", LOOPBACK)
    assert broker_urls.endpoint_url_refusal("https://127.0.0.1/", LOOPBACK) is None
