"""`webhooks_ssrf_refusals_total` counts the requests the SSRF guard refused: by the URL's
scheme before resolving, and by the address a name resolves to at connect time."""

import pytest
from prometheus_client import REGISTRY

from deliveries.destinations.http_client import transport
from webhooks_core.egress.ssrf import AddressPolicy, parse_networks

pytestmark = pytest.mark.fast


def refusals() -> float:
    return REGISTRY.get_sample_value("webhooks_ssrf_refusals_total") or 0.0


def post(url: str, policy: AddressPolicy) -> transport.HttpResult:
    return transport.post(
        url, b"{}", {}, connect_timeout=1.0, read_timeout=1.0, excerpt_limit=100, policy=policy
    )


def test_a_refused_scheme_is_counted() -> None:
    policy = AddressPolicy(parse_networks("127.0.0.0/8"), require_https=True)
    before = refusals()

    result = post("http://127.0.0.1:9/hook", policy)

    assert "refused by the SSRF guard" in result.error
    assert refusals() == before + 1


def test_an_address_refused_at_connect_time_is_counted() -> None:
    # The name resolves (through the injected resolver) to an address outside the allowed
    # networks: refused before any connection is made.
    policy = AddressPolicy(
        parse_networks("127.0.0.0/8"), require_https=False, resolver=lambda host, port: ["10.9.8.7"]
    )
    before = refusals()

    result = post("http://hooks.internal.test:8080/hook", policy)

    assert result.status_code is None
    assert result.error
    assert refusals() == before + 1


def test_an_allowed_address_that_does_not_answer_is_not_counted() -> None:
    policy = AddressPolicy(
        parse_networks("127.0.0.0/8"),
        require_https=False,
        resolver=lambda host, port: ["127.0.0.1"],
    )
    before = refusals()

    post("http://hooks.internal.test:9/hook", policy)  # nothing listens on port 9

    assert refusals() == before
