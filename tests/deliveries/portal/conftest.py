"""No real DNS in the portal's tests: names resolve through a fixed table."""

import ipaddress

import pytest

from webhooks_core.egress import ssrf

PUBLIC = "93.184.215.14"
PRIVATE_NAME = "intranet.example.com"


def fake_resolve(host: str, port: int) -> list[str]:
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    if host == PRIVATE_NAME:
        return ["10.1.2.3"]
    if host.endswith((".example.com", ".example")):
        return [PUBLIC]
    raise OSError(f"{host} does not resolve (test resolver)")


@pytest.fixture(autouse=True)
def no_real_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ssrf, "resolve_host", fake_resolve)
