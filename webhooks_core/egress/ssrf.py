"""SSRF guard: which addresses a webhook may be sent to. Pure logic, no Django, no sockets
unless a resolver is passed in.

A webhook URL is chosen by whoever registers the endpoint, so without a guard the platform
would POST into our own network for them (cloud metadata at 169.254.169.254, a database's
admin port on 10.x, a service on loopback). Only globally routable unicast addresses are
allowed (``is_global``, and not one of `EXTRA_BLOCKED_NETWORKS`), plus the networks an
operator lists in ``WEBHOOKS_ALLOWED_NETWORKS`` (for endpoints a tenant makes in the
portal: ``WEBHOOKS_PORTAL_ALLOWED_NETWORKS`` instead, none by default). The check
runs when an endpoint is saved (early, clear feedback) and again at connect time on every
address the name resolves to, and the connection then goes to the checked address itself,
so a DNS answer that changes in between (DNS rebinding) cannot slip through.
"""

import contextlib
import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from urllib3.exceptions import LocationParseError
from urllib3.util import parse_url

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]

# Ranges that Python's `is_global` does not (or not on every version) flag but that reach
# internal or translated destinations.
EXTRA_BLOCKED_NETWORKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(cidr)
    for cidr in (
        "100.64.0.0/10",  # carrier-grade NAT: often routes to internal workloads
        "192.0.0.0/24",  # IETF protocol assignments
        "192.88.99.0/24",  # 6to4 relay anycast
        "64:ff9b::/96",  # NAT64: embeds an IPv4 address
        "64:ff9b:1::/48",  # local-use NAT64
        "2002::/16",  # 6to4: embeds an IPv4 address
        "2001::/32",  # Teredo: embeds an IPv4 address
        # Python 3.11's `is_global` says True for these two:
        "fec0::/10",  # deprecated site-local (RFC 3879): still routed inside some sites
        "3fff::/20",  # documentation (RFC 9637)
    )
)


class UnsafeURL(ValueError):
    """The URL may not receive webhooks; the message says why and is safe to show."""


@dataclass(frozen=True)
class AddressPolicy:
    allowed_networks: tuple[IPNetwork, ...] = ()
    require_https: bool = True
    # Names resolve through this (host, port) -> addresses; tests may replace it.
    resolver: Resolver | None = field(default=None, compare=False)
    # The setting that lists `allowed_networks`, named in refusals ("" names none: a
    # tenant in the portal is told the rule, not the operator's settings).
    allowance_setting: str = field(default="WEBHOOKS_ALLOWED_NETWORKS", compare=False)

    def resolve(self, host: str, port: int) -> list[str]:
        resolver = self.resolver or resolve_host
        answers = _answers.get()
        if answers is None:
            return list(resolver(host, port))
        return answers.resolve(resolver, host, port)


class NotResolvedHere(Exception):
    """A name was to be resolved where no network I/O may happen (`Answers.only_kept`)."""


@dataclass
class Answers:
    """Names resolved once for a piece of work (`resolved_once`): a first pass resolves,
    outside any lock; a second pass, under a row lock, reads the same answers and, with
    `only_kept`, refuses to resolve a name the first did not (`NotResolvedHere`)."""

    kept: dict[tuple[Resolver, str, int], list[str] | OSError | UnicodeError] = field(
        default_factory=dict
    )
    only_kept: bool = False

    def resolve(self, resolver: Resolver, host: str, port: int) -> list[str]:
        key = (resolver, host, port)
        if key not in self.kept:
            if self.only_kept:
                raise NotResolvedHere(host)
            try:
                self.kept[key] = list(resolver(host, port))
            except (OSError, UnicodeError) as error:
                self.kept[key] = error
        answer = self.kept[key]
        if isinstance(answer, Exception):
            raise answer
        return list(answer)


_answers: ContextVar[Answers | None] = ContextVar("ssrf_answers", default=None)


@contextlib.contextmanager
def resolved_once(answers: Answers | None = None) -> Iterator[Answers]:
    """Within the block every policy's names resolve through `answers` (new ones when
    None), so that a later block given the same answers does no network I/O."""
    current = answers if answers is not None else Answers()
    token = _answers.set(current)
    try:
        yield current
    finally:
        _answers.reset(token)


def parse_networks(value: str | Iterable[str]) -> tuple[IPNetwork, ...]:
    """`"127.0.0.0/8, ::1"` -> networks. Raises ValueError naming the bad entry."""
    items = value.split(",") if isinstance(value, str) else value
    networks = []
    for item in items:
        text = item.strip()
        if not text:
            continue
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ValueError(f"{text!r} is not an IP network (CIDR)") from None
    return tuple(networks)


def resolve_host(host: str, port: int) -> list[str]:
    """Every address the name resolves to (IPv4 and IPv6), deduplicated, in order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _unmapped(address: IPAddress) -> IPAddress:
    # ::ffff:10.0.0.1 reaches 10.0.0.1: judge the IPv4 address it carries.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def address_refusal(address: str | IPAddress, policy: AddressPolicy) -> str | None:
    """Why this address may not be connected to, or None when it may."""
    try:
        ip = _unmapped(ipaddress.ip_address(str(address).split("%", 1)[0]))
    except ValueError:
        return f"{address!r} is not an IP address"
    if any(ip in network for network in policy.allowed_networks if network.version == ip.version):
        return None
    kind = (
        "loopback"
        if ip.is_loopback
        else "site-local"
        if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local
        else "link-local"
        if ip.is_link_local
        else "multicast"
        if ip.is_multicast
        else "unspecified"
        if ip.is_unspecified
        else "reserved"
        if ip.is_reserved
        else "private"
        if ip.is_private
        else None
    )
    if kind is None and (
        not ip.is_global
        or any(ip in net for net in EXTRA_BLOCKED_NETWORKS if net.version == ip.version)
    ):
        kind = "non-public"
    if kind is None:
        return None
    if not policy.allowance_setting:
        return f"{ip} is a {kind} address (webhooks go to public addresses only)"
    return f"{ip} is a {kind} address (not in {policy.allowance_setting})"


# A host made only of digits, dots and hex prefixes that is not a dotted quad (`0x7f.1`,
# `2130706433`, `017700000001`): the C resolver reads it as an IPv4 address in a form
# nobody reviewing the URL would recognise.
_NUMERIC_HOST = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+))*\.?$", re.IGNORECASE)


def _comparable_host(host: str) -> str:
    host = host.lower().strip("[]")
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def ambiguity_refusal(url: str) -> str | None:
    """Why this URL's host is ambiguous, or None.

    Python's `urlsplit` and urllib3 (which `requests` connects with) do not always agree
    on where the host ends: in `http://127.0.0.1:1\\@example.com/` the first sees
    example.com, the second connects to 127.0.0.1. So forms that parsers read differently
    (backslashes, user info, whitespace, control characters) are refused outright, and the
    host both parsers find must be the same.
    """
    if "\\" in url:
        return "The URL contains a backslash."
    if any(ord(char) <= 32 or ord(char) == 127 for char in url):
        return "The URL contains whitespace or control characters."
    parts = urlsplit(url)
    if "@" in parts.netloc:
        return "The URL contains user info (user:password@); put credentials in a header."
    try:
        parsed = parse_url(url)
        split_port = parts.port
    except (LocationParseError, ValueError):
        return "The URL's host or port cannot be parsed."
    if _comparable_host(parsed.host or "") != _comparable_host(parts.hostname or ""):
        return "The URL's host is ambiguous (HTTP clients would read it differently)."
    if parsed.port != split_port:
        return "The URL's port is ambiguous (HTTP clients would read it differently)."
    host = parts.hostname or ""
    if _NUMERIC_HOST.match(host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return f"{host!r} is an IP address in a non-standard form; write it as a.b.c.d."
    return None


def scheme_refusal(url: str, policy: AddressPolicy) -> str | None:
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        return "Only http and https URLs can receive webhooks."
    if scheme == "http" and policy.require_https:
        return "Only https URLs are allowed (WEBHOOKS_REQUIRE_HTTPS)."
    return None


Origin = tuple[str, str, int]
DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str | None) -> Origin | None:
    """``(scheme, host, port)`` of a URL, as a browser compares origins: scheme and host
    in lower case (IDNA for a Unicode name), the port spelled out (``https://a`` and
    ``https://a:443`` are one origin). None for no URL or one whose origin cannot be read.

    A credential stored for one origin must not follow the URL to another
    (``deliveries.endpoints.lifecycle``, ``receivers.services.sources``).
    """
    if not url:
        return None
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or DEFAULT_PORTS.get(scheme, 0)
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return scheme, _comparable_host(parts.hostname), port


def same_origin(before: str | None, after: str | None) -> bool:
    """Whether two URLs share their origin (two URLs without one never do)."""
    first = origin(before)
    return first is not None and first == origin(after)


def url_refusal(url: str, policy: AddressPolicy) -> str | None:
    """Why this URL may not receive webhooks, or None.

    A literal IP is judged as is; a name is resolved and every address must pass. A name
    that does not resolve (yet) is accepted here: the connect-time check still applies.
    """
    problem = scheme_refusal(url, policy) or ambiguity_refusal(url)
    if problem:
        return problem
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        return "The URL has no host."
    try:
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError:
        return "The URL's port is not valid."
    try:
        ipaddress.ip_address(host)
        addresses = [host]
    except ValueError:
        try:
            addresses = policy.resolve(host, port)
        except (OSError, UnicodeError):
            return None
    for address in addresses:
        problem = address_refusal(address, policy)
        if problem:
            return f"{host} resolves to {problem}" if host != address else problem
    return None
