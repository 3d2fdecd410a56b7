"""Broker endpoint URLs: which ones may receive webhooks, and their credentials.

Pure logic, no Django, no sockets unless the policy's resolver is used. An endpoint's
URL scheme picks its destination kind; besides http(s) these schemes name a broker:

    amqp://user:pass@host:5672/vhost?exchange=orders&routing_key=invoice
    nats://user:pass@host:4222?subject=webhooks.orders
    redis://:pass@host:6379/0?stream=webhooks&maxlen=100000

User info (the broker's user and password) is allowed for these schemes only. The
password is never stored in the URL: the stored URL carries `MASK` in its place
(``amqp://guest:***@host:5672/…``), so every reader (API, admin, portal, logs) sees it
masked, and the password itself is kept encrypted beside it (`Endpoint.url_password`).
The broker's address passes the same SSRF guard as an HTTP URL's (`ssrf.address_refusal`
on every address the name resolves to), when saved and again at every connect.

Brokers are never handed the URL text: the clients get host, port, user and password
as separate values, so no second URL parser can read the host differently.
"""

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

from webhooks_core.egress import ssrf

MASK = "***"

#: scheme -> (default port, TLS, required query parameters, optional query parameters)
SCHEMES: dict[str, tuple[int, bool, tuple[str, ...], tuple[str, ...]]] = {
    "amqp": (5672, False, ("exchange",), ("routing_key",)),
    "amqps": (5671, True, ("exchange",), ("routing_key",)),
    "nats": (4222, False, ("subject",), ()),
    "redis": (6379, False, ("stream",), ("maxlen",)),
    "rediss": (6379, True, ("stream",), ("maxlen",)),
}
HTTP_SCHEMES = ("http", "https")
MAX_MAXLEN = 10**9
# NATS subjects: tokens separated by dots, no wildcards (a publish names one subject).
_NATS_FORBIDDEN = set(" \t\r\n*>")


class BrokerURLInvalid(ValueError):
    """The broker URL cannot be used; the message says why and is safe to show."""


@dataclass(frozen=True)
class BrokerURL:
    scheme: str
    host: str
    port: int
    username: str = ""
    password: str = field(default="", repr=False)
    # AMQP: the virtual host; Redis: the database number as text; NATS: unused.
    path: str = ""
    params: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def tls(self) -> bool:
        return SCHEMES[self.scheme][1]

    @property
    def pool_key(self) -> tuple[str, str, int, str, str, str]:
        """What one connection pool is for: the same broker, as the same user."""
        return (self.scheme, self.host, self.port, self.username, self.password, self.path)


def is_broker_url(url: str) -> bool:
    try:
        return urlsplit(url).scheme.lower() in SCHEMES
    except ValueError:
        return False


def parse(url: str) -> BrokerURL:
    """The parts of a broker URL; raises `BrokerURLInvalid` saying what is wrong."""
    if "\\" in url:
        raise BrokerURLInvalid("The URL contains a backslash.")
    if any(ord(char) <= 32 or ord(char) == 127 for char in url):
        raise BrokerURLInvalid("The URL contains whitespace or control characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise BrokerURLInvalid("The URL's host or port cannot be parsed.") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise BrokerURLInvalid(f"{scheme!r} is not a broker scheme.")
    default_port, _tls, required, optional = SCHEMES[scheme]
    host = (parts.hostname or "").lower()
    if not host:
        raise BrokerURLInvalid("The URL has no host.")
    if parts.netloc.count("@") > 1:
        raise BrokerURLInvalid("The URL's user info is ambiguous (more than one '@').")
    if parts.fragment:
        raise BrokerURLInvalid("A broker URL has no fragment (#…).")
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    params: dict[str, str] = {}
    for name, value in pairs:
        if name not in required + optional:
            allowed = ", ".join(required + optional)
            raise BrokerURLInvalid(
                f"{scheme} URLs take the query parameters {allowed}; not {name!r}."
            )
        if name in params:
            raise BrokerURLInvalid(f"The query parameter {name!r} is given twice.")
        params[name] = value
    for name in required:
        if not params.get(name):
            raise BrokerURLInvalid(f"{scheme} URLs need ?{name}=… (the {_role(name)}).")
    path = unquote(parts.path)
    if scheme.startswith("amqp"):
        # "/" or nothing: the default virtual host "/"; "/%2F" is "/" spelled out.
        path = path[1:] if path.startswith("/") else path
        path = path or "/"
    elif scheme.startswith("redis"):
        db = path.strip("/") or "0"
        if not db.isdigit() or int(db) > 15_000:
            raise BrokerURLInvalid("A redis URL's path is the database number (/0, /1, …).")
        path = db
        maxlen = params.get("maxlen")
        if maxlen is not None and (not maxlen.isdigit() or not 1 <= int(maxlen) <= MAX_MAXLEN):
            raise BrokerURLInvalid(f"maxlen must be a whole number from 1 to {MAX_MAXLEN}.")
    else:
        if path not in ("", "/"):
            raise BrokerURLInvalid("A nats URL has no path; name the subject in ?subject=….")
        path = ""
        subject = params["subject"]
        if any(char in _NATS_FORBIDDEN for char in subject) or "" in subject.split("."):
            raise BrokerURLInvalid(
                "The subject is dot-separated tokens without spaces or wildcards (* >)."
            )
    return BrokerURL(
        scheme=scheme,
        host=host,
        port=port or default_port,
        username=unquote(parts.username or ""),
        password=unquote(parts.password or ""),
        path=path,
        params=params,
    )


def _role(name: str) -> str:
    return {
        "exchange": "exchange to publish to",
        "subject": "subject a JetStream stream listens on",
        "stream": "stream to add the messages to",
    }[name]


def refusal(url: str, policy: ssrf.AddressPolicy) -> str | None:
    """Why this broker URL may not receive webhooks, or None. Like `ssrf.url_refusal`:
    a literal IP is judged as is, a name is resolved and every address must pass; a
    name that does not resolve (yet) is accepted, the connect-time check still applies."""
    try:
        broker = parse(url)
    except BrokerURLInvalid as exc:
        return str(exc)
    try:
        addresses = resolve(broker.host, broker.port, policy)
    except (OSError, UnicodeError):
        return None
    for address in addresses:
        problem = ssrf.address_refusal(address, policy)
        if problem:
            return f"{broker.host} resolves to {problem}" if broker.host != address else problem
    return None


def resolve(host: str, port: int, policy: ssrf.AddressPolicy) -> Sequence[str]:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return [host.strip("[]")]
    except ValueError:
        return policy.resolve(host, port)


def checked_address(broker: BrokerURL, policy: ssrf.AddressPolicy) -> str:
    """The address to connect to, after the guard checked every one the name resolves to
    (at connect time, as `ssrf_transport` does for HTTP). Raises `ssrf.UnsafeURL`."""
    addresses = list(resolve(broker.host, broker.port, policy))
    if not addresses:
        raise ssrf.UnsafeURL(f"{broker.host} does not resolve")
    for address in addresses:
        problem = ssrf.address_refusal(address, policy)
        if problem:
            raise ssrf.UnsafeURL(problem)
    return addresses[0]


def endpoint_url_refusal(url: str, policy: ssrf.AddressPolicy) -> str | None:
    """Why an endpoint may not have this URL (any kind), or None."""
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        return "The URL cannot be parsed."
    if scheme in SCHEMES:
        return refusal(url, policy)
    if scheme not in HTTP_SCHEMES:
        kinds = ", ".join((*HTTP_SCHEMES, *SCHEMES))
        return f"Only {kinds} URLs can receive webhooks."
    return ssrf.url_refusal(url, policy)


def split_password(url: str) -> tuple[str, str]:
    """(the URL with `MASK` for its password, the password); the URL as is without one."""
    parts = urlsplit(url)
    if parts.password is None or "@" not in parts.netloc:
        return url, ""
    userinfo, hostport = parts.netloc.rsplit("@", 1)
    user = userinfo.split(":", 1)[0]
    netloc = f"{user}:{MASK}@{hostport}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), unquote(
        parts.password
    )


def has_masked_password(url: str) -> bool:
    try:
        return urlsplit(url).password == MASK
    except ValueError:
        return False


def with_password(url: str, password: str) -> str:
    """The stored (masked) URL with its real password put back: for the wire only."""
    parts = urlsplit(url)
    if not password or "@" not in parts.netloc:
        return url
    userinfo, hostport = parts.netloc.rsplit("@", 1)
    user = userinfo.split(":", 1)[0]
    netloc = f"{user}:{quote(password, safe='')}@{hostport}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def masked(url: str) -> str:
    """A broker URL for display: the password replaced by `MASK`, the rest as given."""
    try:
        return split_password(url)[0]
    except ValueError:
        return MASK
