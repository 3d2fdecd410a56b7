"""Destination kinds by URL scheme (see `base`)."""

from urllib.parse import urlsplit

from .base import Credentials, Destination, Kind, Outcome
from .http import HttpDestination

_KINDS: dict[str, Destination] = {}


def register(scheme: str, destination: Destination) -> None:
    _KINDS[scheme.lower()] = destination


def for_url(url: str) -> Destination:
    """The destination kind of an endpoint URL; HTTP for anything not registered (its
    transport refuses a scheme it does not send)."""
    return _KINDS.get(urlsplit(url).scheme.lower(), _KINDS["http"])


register("http", HttpDestination())
register("https", _KINDS["http"])

__all__ = ["Credentials", "Destination", "Kind", "Outcome", "for_url", "register"]
