"""The SSRF guard's pure rules, and its connect-time adapter against a real local server."""

import pytest

from deliveries.destinations.http_client import transport
from tests.receiver import Receiver
from webhooks_core.egress import ssrf
from webhooks_core.egress.ssrf import AddressPolicy, address_refusal, parse_networks, url_refusal

NOTHING_ALLOWED = AddressPolicy(allowed_networks=(), require_https=False)
LOOPBACK_ALLOWED = AddressPolicy(
    allowed_networks=parse_networks("127.0.0.0/8, ::1"), require_https=False
)


def fixed_resolver(*addresses: str) -> ssrf.Resolver:
    return lambda host, port: list(addresses)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "non-public"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("fd00::1", "private"),
        ("2002:7f00:1::", "non-public"),
    ],
)
def test_internal_addresses_are_refused(address: str, kind: str) -> None:
    problem = address_refusal(address, NOTHING_ALLOWED)
    assert problem is not None
    assert kind in problem


@pytest.mark.parametrize("address", ["93.184.215.14", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(address, NOTHING_ALLOWED) is None


def test_the_allow_list_admits_its_networks_only() -> None:
    policy = AddressPolicy(allowed_networks=parse_networks("10.20.0.0/16"))
    assert address_refusal("10.20.3.4", policy) is None
    assert address_refusal("10.21.0.1", policy) is not None
    assert address_refusal("127.0.0.1", LOOPBACK_ALLOWED) is None
    assert address_refusal("::1", LOOPBACK_ALLOWED) is None
    assert address_refusal("10.0.0.1", LOOPBACK_ALLOWED) is not None


def test_bad_networks_are_named() -> None:
    with pytest.raises(ValueError, match=r"'10\.0\.0\.0/33'"):
        parse_networks("127.0.0.0/8,10.0.0.0/33")
    assert parse_networks("") == ()


def test_urls_are_judged_by_every_address_their_host_resolves_to() -> None:
    mixed = AddressPolicy(require_https=False, resolver=fixed_resolver("1.1.1.1", "10.0.0.5"))
    problem = url_refusal("http://sneaky.example/hook", mixed)
    assert problem is not None
    assert "sneaky.example resolves to 10.0.0.5" in problem
    public = AddressPolicy(require_https=False, resolver=fixed_resolver("1.1.1.1"))
    assert url_refusal("http://fine.example/hook", public) is None


def test_literal_addresses_and_schemes() -> None:
    assert url_refusal("http://169.254.169.254/latest/meta-data", NOTHING_ALLOWED) is not None
    assert url_refusal("http://[::1]:8000/", NOTHING_ALLOWED) is not None
    assert url_refusal("http://[::1]:8000/", LOOPBACK_ALLOWED) is None
    assert url_refusal("ftp://1.1.1.1/", NOTHING_ALLOWED) is not None
    https_only = AddressPolicy(require_https=True)
    problem = url_refusal("http://1.1.1.1/", https_only)
    assert problem is not None
    assert "https" in problem
    assert url_refusal("https://1.1.1.1/", https_only) is None


def test_a_name_that_does_not_resolve_is_left_to_the_connect_time_check() -> None:
    def unresolvable(host: str, port: int) -> list[str]:
        raise OSError("no such host")

    assert url_refusal("https://nowhere.invalid/", AddressPolicy(resolver=unresolvable)) is None


def post(url: str, policy: AddressPolicy | None) -> transport.HttpResult:
    return transport.post(
        url,
        b"{}",
        {"Content-Type": "application/json"},
        connect_timeout=2,
        read_timeout=2,
        policy=policy,
    )


def test_connect_time_refuses_a_name_resolving_to_loopback() -> None:
    with Receiver.running() as receiver:
        result = post(f"http://localhost:{receiver.port}/hook", NOTHING_ALLOWED)
        assert result.status_code is None
        assert "refused by the SSRF guard" in result.error
        assert "loopback" in result.error
        assert receiver.requests == []
        # The same request with loopback allowed arrives: the refusal was the guard's.
        assert post(f"http://localhost:{receiver.port}/hook", LOOPBACK_ALLOWED).status_code == 200


def test_connect_time_uses_the_address_it_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS rebinding: the socket goes to the address that passed, not to a second answer."""
    answers = iter([["127.0.0.1"], ["10.9.9.9"]])
    policy = AddressPolicy(
        allowed_networks=LOOPBACK_ALLOWED.allowed_networks,
        require_https=False,
        resolver=lambda host, port: next(answers),
    )
    with Receiver.running() as receiver:
        result = post(f"http://rebind.test:{receiver.port}/hook", policy)
        assert result.status_code == 200, result.error
        [request] = receiver.requests
        assert request.headers["Host"] == f"rebind.test:{receiver.port}"


def test_connect_time_refuses_http_when_https_is_required() -> None:
    policy = AddressPolicy(allowed_networks=LOOPBACK_ALLOWED.allowed_networks, require_https=True)
    with Receiver.running() as receiver:
        result = post(receiver.url, policy)
        assert result.status_code is None
        assert "https" in result.error
        assert receiver.requests == []


# --- ambiguous URL forms are refused outright -------------------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:18291\\@example.com/x", "backslash"),
        ("https://example.com\\@127.0.0.1/", "backslash"),
        ("https://user:pw@example.com/", "user info"),
        ("https://user@example.com/", "user info"),
        ("https://127.0.0.1%2f@example.com/", "user info"),
        ("https://exa mple.com/", "whitespace"),
        ("https://example.com\t/x", "whitespace"),
        ("https://example.com/\r\nHost: x", "whitespace"),
        ("https://example.com:80:90/", "cannot be parsed"),
        ("https://0x7f.1/", "non-standard form"),
        ("https://2130706433/", "non-standard form"),
        ("https://017700000001/", "non-standard form"),
        ("https://127.1/", "non-standard form"),
    ],
)
def test_ambiguous_url_forms_are_refused(url: str, reason: str) -> None:
    # Whatever the names would resolve to: refused before any resolution.
    policy = AddressPolicy(require_https=False, resolver=fixed_resolver("1.1.1.1"))
    problem = url_refusal(url, policy)
    assert problem is not None
    assert reason in problem


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/hooks?a=b#c",
        "https://api.example.com:8443/v1",
        "https://[2606:4700::1111]/hook",
        "https://bücher.example/hook",
        "https://EXAMPLE.com./x",
    ],
)
def test_plain_url_forms_stay_accepted(url: str) -> None:
    policy = AddressPolicy(require_https=False, resolver=fixed_resolver("1.1.1.1"))
    assert ssrf.ambiguity_refusal(url) is None
    assert url_refusal(url, policy) is None


def test_endpoint_clean_does_no_dns_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules (and the save-time check) are the services'; a model form's
    full_clean no longer resolves names (the connect-time guard does)."""
    from deliveries.models import Endpoint

    def no_dns(*args: object, **kwargs: object) -> None:
        raise AssertionError("a DNS lookup in Endpoint.clean()")

    monkeypatch.setattr("socket.getaddrinfo", no_dns)
    Endpoint(url="https://somewhere.example/hook", event_types=["*"]).clean()


def test_the_suite_never_resolves_names_through_real_dns() -> None:
    """tests/conftest.py answers IP literals and localhost only: no test depends on DNS."""
    import socket

    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("example.com", 443)
    assert {info[4][0] for info in socket.getaddrinfo("localhost", 80)} <= {"127.0.0.1", "::1"}
    assert socket.getaddrinfo("127.0.0.1", 80)[0][4][0] == "127.0.0.1"


def test_names_resolved_once_are_answered_again_without_resolving() -> None:
    asked: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        if host == "gone.example":
            raise OSError("no such name")
        return ["1.1.1.1"]

    policy = AddressPolicy(require_https=False, resolver=resolver)
    with ssrf.resolved_once() as answers:
        assert url_refusal("http://one.example/", policy) is None
        assert url_refusal("http://gone.example/", policy) is None
    answers.only_kept = True
    with ssrf.resolved_once(answers):
        # The same answers, the unresolvable name's error included, and no new lookup.
        assert policy.resolve("one.example", 80) == ["1.1.1.1"]
        with pytest.raises(OSError, match="no such name"):
            policy.resolve("gone.example", 80)
        with pytest.raises(ssrf.NotResolvedHere):
            policy.resolve("two.example", 80)
    assert asked == ["one.example", "gone.example"]
    # Outside the block names resolve as ever.
    assert policy.resolve("one.example", 80) == ["1.1.1.1"]
    assert asked[-1] == "one.example"
