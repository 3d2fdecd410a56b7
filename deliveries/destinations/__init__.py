"""Destination kinds by URL scheme (see `base`)."""

from urllib.parse import urlsplit

from deliveries.destinations.amqp import AmqpDestination
from deliveries.destinations.base import Credentials, Destination, Kind, Outcome
from deliveries.destinations.http import HttpDestination
from deliveries.destinations.nats import NatsDestination
from deliveries.destinations.redis_streams import RedisStreamDestination

_KINDS: dict[str, Destination] = {}


def register(scheme: str, destination: Destination) -> None:
    _KINDS[scheme.lower()] = destination


def for_url(url: str) -> Destination:
    """The destination kind of an endpoint URL; HTTP for anything not registered (its
    transport refuses a scheme it does not send)."""
    return _KINDS.get(urlsplit(url).scheme.lower(), _KINDS["http"])


register("http", HttpDestination())
register("https", _KINDS["http"])
# Broker destinations; their URLs are checked by `broker_urls`. SQS,
# EventBridge, Pub/Sub or Kafka would register here the same way (docs/destinations/).
register("amqp", AmqpDestination())
register("amqps", _KINDS["amqp"])
register("nats", NatsDestination())
register("redis", RedisStreamDestination())
register("rediss", _KINDS["redis"])

__all__ = ["Credentials", "Destination", "Kind", "Outcome", "for_url", "register"]
