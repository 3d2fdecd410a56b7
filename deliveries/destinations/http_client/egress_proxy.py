"""Sending through the operator's forward proxy (``WEBHOOKS_EGRESS_PROXY_URL``), so every
request leaves from one address the endpoints' servers can allow-list. No Django here.

https goes through a CONNECT tunnel (TLS end to end, the proxy sees only host and port);
http in absolute form. The proxy is the operator's own, so the connection *to it* is not
judged by the SSRF guard; the *target* still is: we resolve its name and check every
address before asking the proxy. The residual risk (the proxy resolves the name again and
may get another answer) is the docs' (delivery-auth/egress-proxy.md): a proxy that
enforces the same rules itself, such as Stripe's smokescreen, closes it.
"""

import ipaddress
from typing import Any
from urllib.parse import unquote, urlsplit

import urllib3
from urllib3.connection import HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from webhooks_core.egress import deadlines
from webhooks_core.egress.ssrf import AddressPolicy, address_refusal
from webhooks_core.egress.ssrf_transport import resolve_within


def proxy_problem(url: str) -> str | None:
    """Why ``url`` cannot be the egress proxy (for the system check), or None."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "its port is not a number"
    if parts.scheme.lower() != "http":
        return "it must be an http:// URL (http://[user:password@]host:port)"
    if not parts.hostname or port is None:
        return "it must name a host and a port (http://host:port)"
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return "it must have no path, query or fragment"
    return None


def target_refusal(
    url: str, policy: AddressPolicy, deadline: deadlines.Deadline | None = None
) -> str | None:
    """The SSRF guard's connect-time check of a proxied request's target: every address
    its host resolves to must pass (a name that does not resolve, or not before
    `deadline`, is refused: we would otherwise hand the proxy a target nobody checked)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            addresses = resolve_within(policy, host, port, deadline)
        except (OSError, UnicodeError) as exc:
            return f"cannot resolve {host!r} to check it before the proxy: {exc}"
    if not addresses:
        return f"{host!r} resolves to no address"
    for address in addresses:
        problem = address_refusal(address, policy)
        if problem:
            return f"{host} -> {problem}"
    return None


# Connections to the proxy, not judged by the SSRF guard (the module's docstring), each
# within its request's deadline from its connect (the CONNECT answer included) to its answer.
class ProxiedHTTPConnection(deadlines.DeadlineBoundConnection):
    pass


class ProxiedHTTPSConnection(deadlines.DeadlineBoundConnection, HTTPSConnection):
    pass


class ProxiedHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = ProxiedHTTPConnection


class ProxiedHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = ProxiedHTTPSConnection


POOL_CLASSES: dict[str, type[HTTPConnectionPool]] = {
    "http": ProxiedHTTPConnectionPool,
    "https": ProxiedHTTPSConnectionPool,
}


def proxy_manager(proxy_url: str, **pool_kw: Any) -> urllib3.ProxyManager:
    """A pool manager sending through the proxy; user:password in its URL become the
    ``Proxy-Authorization`` of every request (and CONNECT), never a logged URL."""
    parts = urlsplit(proxy_url)
    headers = None
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers = urllib3.make_headers(proxy_basic_auth=credentials)
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    bare = f"http://{host}:{parts.port}"
    manager = urllib3.ProxyManager(bare, proxy_headers=headers, **pool_kw)
    manager.pool_classes_by_scheme = POOL_CLASSES
    return manager
