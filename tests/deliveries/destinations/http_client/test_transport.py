"""The outbound transport against a real HTTP server on 127.0.0.1: what goes on the wire
(the request target, the headers) and what is refused before anything is sent."""

import socket
import threading
import time
from collections.abc import Callable

import pytest
from requests.exceptions import InvalidHeader

from deliveries.destinations.http_client import transport
from tests.receiver import Receiver
from webhooks_core.egress import deadlines


def post(url: str, headers: dict[str, str]) -> transport.HttpResult:
    return transport.post(url, b"{}", headers, connect_timeout=2, read_timeout=2)


def test_the_request_goes_to_the_urls_path_and_query_as_written() -> None:
    with Receiver.running() as receiver:
        base = receiver.url.removesuffix("/hook")
        for path in ("/hook/a?x=1&y=%20z", "/other/b", "/hook"):
            assert post(base + path, {}).status_code == 200
        assert [r.path for r in receiver.requests] == ["/hook/a?x=1&y=%20z", "/other/b", "/hook"]


def test_our_user_agent_goes_unless_the_caller_sets_one_in_any_case() -> None:
    ours = _raw_head(lambda url: post(url, {}))
    theirs = _raw_head(lambda url: post(url, {"user-agent": "their-client/2"}))
    assert _raw_values(ours, "User-Agent") == [transport.USER_AGENT]
    # Theirs replaces ours: one header, not both.
    assert _raw_values(theirs, "User-Agent") == ["their-client/2"]


def test_plain_headers_go_as_given() -> None:
    headers = {"X-Empty": "", "X-Spaces-Inside": "a b  c", "X-Latin": "caf\xe9"}
    with Receiver.running() as receiver:
        assert post(receiver.url, headers).status_code == 200
        [request] = receiver.requests
        assert _values(request.headers, "X-Empty") == [""]
        assert _values(request.headers, "X-Spaces-Inside") == ["a b  c"]
        assert _values(request.headers, "X-Latin") == ["caf\xe9"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("X-Injected", "a\r\nX-Evil: 1"),
        ("X-Trailing", "token\n"),
        ("X-Carriage", "a\rb"),
        ("X-Folded", "a\r\n b"),
        ("X-Leading", " value"),
        ("X-Tab", "\tvalue"),
        ("Bad:Name", "v"),
        (" Spaced", "v"),
        ("Line\nName", "v"),
        ("", "v"),
    ],
)
def test_a_header_that_could_break_the_request_is_refused_before_sending(
    name: str, value: str
) -> None:
    with Receiver.running() as receiver:
        with pytest.raises(InvalidHeader):
            post(receiver.url, {"X-Fine": "1", name: value})
        assert receiver.requests == []


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/a",
        "http://127.0.0.1/b?x=1",
        "https://hooks.example:8443/c",
        "https://hooks.example/d",
    ],
)
def test_a_request_uses_the_pool_the_manager_itself_would_hand_out(url: str) -> None:
    # The pool's key is made once per host (`_pool_key`); the pool must still be the
    # manager's own for that host, else connections would not be shared or reused.
    manager = transport._manager(None)
    scheme, host, port, _ = transport._target(url)
    key, context = transport._pool_key(manager, scheme, host, port)
    ours = manager.connection_from_pool_key(key, request_context=dict(context))
    assert ours is manager.connection_from_host(host, port=port, scheme=scheme)
    assert (ours.host, ours.port) == (host, port or (443 if scheme == "https" else 80))


def test_a_scheme_no_pool_serves_is_an_error_result_not_an_exception() -> None:
    result = post("ftp://127.0.0.1:21/hook", {})
    assert result.status_code is None
    assert "URLSchemeUnknown" in result.error


def test_deadlines_armed_in_any_order_each_fire_at_their_time() -> None:
    # The watchdog is woken only for a deadline sooner than the one it waits for; a later
    # one is still cut at its own time, and an earlier one armed after it is not late.
    class Held:
        def __init__(self) -> None:
            self.sock = self
            self.shut_at: float | None = None

        def shutdown(self, how: int) -> None:
            self.shut_at = time.monotonic()

    started = time.monotonic()
    offsets = [1.2, 0.6, 1.8, 0.2, 0.9]
    held = []
    for offset in offsets:
        deadline = deadlines.Deadline(started + offset)
        connection = Held()
        deadline.attach(connection)
        held.append(connection)
        # From a thread of its own, as each request arms its deadline.
        thread = threading.Thread(target=deadlines.arm, args=(deadline,))
        thread.start()
        thread.join()
    limit = time.monotonic() + 5
    while any(c.shut_at is None for c in held) and time.monotonic() < limit:
        time.sleep(0.01)
    for offset, connection in zip(offsets, held, strict=True):
        assert connection.shut_at is not None, f"the deadline at +{offset}s never fired"
        late = connection.shut_at - (started + offset)
        assert -0.01 <= late < 0.5, f"the deadline at +{offset}s fired {late:.2f}s off"


def _values(headers: dict[str, str], name: str) -> list[str]:
    return [value for key, value in headers.items() if key.lower() == name.lower()]


def _raw_head(send: Callable[[str], object]) -> bytes:
    """The request head exactly as it went on the wire (the test receiver's parsed headers
    fold a repeated name into one)."""
    server = socket.create_server(("127.0.0.1", 0))
    heads: list[bytes] = []

    def answer() -> None:
        connection, _ = server.accept()
        with connection:
            data = b""
            while b"\r\n\r\n" not in data:
                data += connection.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(_raw_values(head, "Content-Length")[0])
            while len(body) < length:
                body += connection.recv(65536)
            heads.append(head)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    with server:
        send(f"http://127.0.0.1:{server.getsockname()[1]}/hook")
        thread.join(10)
    assert heads, "no request arrived"
    return heads[0]


def _raw_values(head: bytes, name: str) -> list[str]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    pairs = [line.partition(":") for line in lines]
    return [value.strip() for key, _, value in pairs if key.lower() == name.lower()]


def test_pool_managers_are_bounded_the_least_recently_used_closed(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One manager per SSRF policy, client certificate and proxy: distinct policies stand
    # for distinct client certificates here.
    from collections import OrderedDict

    from webhooks_core.egress.ssrf import AddressPolicy, parse_networks

    monkeypatch.setattr(transport, "MAX_MANAGERS", 3, raising=False)
    monkeypatch.setattr(transport, "_managers", OrderedDict())

    def policy(n: int) -> AddressPolicy:
        return AddressPolicy(
            allowed_networks=parse_networks(f"127.0.0.0/8, 10.{n}.0.0/16"), require_https=False
        )

    def send(n: int) -> None:
        result = transport.post(
            receiver.url, b"{}", {}, connect_timeout=1, read_timeout=2, policy=policy(n)
        )
        assert result.status_code == 200

    send(0)
    send(1)
    second = transport._manager(policy(1))
    assert second.pools  # its kept-alive connection to the receiver
    send(2)
    send(0)  # used again: the most recent now
    send(3)
    send(4)

    assert [key[0] for key in transport._managers] == [policy(0), policy(3), policy(4)]
    assert not second.pools  # closed when it was evicted


@pytest.mark.parametrize("proxy_url", ["", "http://127.0.0.1:9"])
def test_a_name_whose_dns_never_answers_ends_the_attempt_at_its_deadline(
    receiver: Receiver, proxy_url: str
) -> None:
    """Resolving the host name is part of the request: connect + read bound it in total,
    directly and through the egress proxy (whose target is checked before it is sent)."""
    from webhooks_core.egress.ssrf import AddressPolicy, parse_networks

    release = threading.Event()

    def resolver(host: str, port: int) -> list[str]:
        release.wait(60)  # a DNS server that never answers
        return ["127.0.0.1"]

    policy = AddressPolicy(
        allowed_networks=parse_networks("127.0.0.0/8"), require_https=False, resolver=resolver
    )
    answer: dict[str, transport.HttpResult] = {}

    def send() -> None:
        answer["result"] = transport.post(
            f"http://never-answers.example:{receiver.port}/hook",
            b"{}",
            {},
            connect_timeout=0.5,
            read_timeout=0.5,
            policy=policy,
            proxy_url=proxy_url,
        )

    sender = threading.Thread(target=send, daemon=True)
    started = time.monotonic()
    sender.start()
    try:
        sender.join(10)
        assert not sender.is_alive(), "the attempt outlived its deadline"
    finally:
        release.set()
    took = time.monotonic() - started
    result = answer["result"]
    assert result.status_code is None
    assert "deadline" in result.error
    assert 0.9 <= took < 5
    assert not receiver.requests
