"""A delivery's request on a kept-alive connection (`http_exchange`, through
`transport.post`) against a scripted HTTP peer on 127.0.0.1: what goes on the wire, when
a connection is kept for the next request and when it is dropped, and what is recorded
when the peer misbehaves."""

import contextlib
import gzip
import socket
import time

import pytest
import urllib3
from pytest_django.fixtures import Settings as SettingsWrapper

from deliveries.destinations.http_client import transport
from tests.raw_peer import ENDS_WITH_CONNECTION, Peer, Script, header, trickling
from webhooks_core.egress import deadlines, ssrf_transport


def answer(reply: bytes, keep: bool = True) -> Script:
    def script(head: bytes, body: bytes, connection: socket.socket) -> bool:
        connection.sendall(reply)
        return keep

    return script


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def post(url: str, body: bytes = b'{"n": 1}', read_timeout: float = 2) -> transport.HttpResult:
    return transport.post(
        url,
        body,
        {"Content-Type": "application/json"},
        connect_timeout=2,
        read_timeout=read_timeout,
    )


def test_the_request_goes_on_the_wire_as_urllib3_itself_sends_it() -> None:
    headers = {"Content-Type": "application/json", "webhook-id": "msg_1", "X-Latin": "caf\xe9"}
    with Peer.running(answer(OK)) as peer:
        transport.post(peer.url + "?a=1", b'{"n": 1}', headers, connect_timeout=2, read_timeout=2)
        urllib3.PoolManager().request(
            "POST",
            peer.url + "?a=1",
            body=b'{"n": 1}',
            headers={"User-Agent": transport.USER_AGENT, **headers},
            retries=False,
        )
        ours, theirs = peer.requests
    assert ours == theirs
    assert ours[0].startswith(b"POST /hook?a=1 HTTP/1.1\r\nHost: 127.0.0.1:")


def test_a_request_without_a_body_goes_as_urllib3_sends_it() -> None:
    with Peer.running(answer(OK)) as peer:
        transport.request("OPTIONS", peer.url, {"Origin": "x"}, connect_timeout=2, read_timeout=2)
        urllib3.PoolManager().request(
            "OPTIONS",
            peer.url,
            headers={"User-Agent": transport.USER_AGENT, "Origin": "x"},
            retries=False,
        )
        ours, theirs = peer.requests
    assert ours == theirs
    assert header(ours[0], "Content-Length") is None


def test_requests_one_after_another_share_one_kept_alive_connection() -> None:
    with Peer.running(answer(OK)) as peer:
        results = [post(peer.url, b'{"n": %d}' % n) for n in range(5)]
        assert [(r.status_code, r.body_excerpt, r.error) for r in results] == [(200, "ok", "")] * 5
        assert peer.connections == 1
        assert [body for _, body in peer.requests] == [b'{"n": %d}' % n for n in range(5)]


def test_a_connection_the_peer_closed_while_idle_is_not_used_again() -> None:
    # The peer closes each connection after its answer without saying so (an idle
    # keep-alive timeout): the next request must not fail on the dead connection.
    with Peer.running(answer(OK, keep=False)) as peer:
        results = []
        for _ in range(3):
            results.append(post(peer.url))
            assert peer.hung_up.acquire(timeout=10)
        assert [(r.status_code, r.error) for r in results] == [(200, "")] * 3
        assert peer.connections == 3


@pytest.mark.parametrize(
    ("reply", "excerpt", "kept"),
    [
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "ok", False),
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end",
            "until the end",
            False,
        ),
        (
            b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            "hello world",
            True,
        ),
        (b"HTTP/1.1 204 No Content\r\n\r\n", "", True),
    ],
    ids=["connection-close", "read-to-the-end", "chunked", "no-content"],
)
def test_each_framing_of_an_answer_is_read_whole_and_its_connection_kept_only_if_it_can_be(
    reply: bytes, excerpt: str, kept: bool
) -> None:
    keep = b"Content-Type: text/plain\r\n\r\n" not in reply and b"Connection: close" not in reply
    with Peer.running(answer(reply, keep=keep)) as peer:
        first, second = post(peer.url), post(peer.url)
        status = int(reply.split(b" ")[1])
        assert (first.status_code, first.body_excerpt, first.error) == (status, excerpt, "")
        assert (second.status_code, second.body_excerpt, second.error) == (status, excerpt, "")
        assert peer.connections == (1 if kept else 2)


def test_a_body_past_the_read_limit_is_cut_to_its_excerpt_and_its_connection_dropped() -> None:
    size = transport.MAX_RESPONSE_READ_BYTES * 3
    big = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"x" * size
    with Peer.running(answer(big)) as peer:
        first = transport.post(
            peer.url, b"{}", {}, connect_timeout=2, read_timeout=2, excerpt_limit=100
        )
        second = post(peer.url)
        assert (first.status_code, first.body_excerpt, first.error) == (200, "x" * 100, "")
        assert second.status_code == 200
        assert peer.connections == 2  # the first connection, its body unread, never reused


@pytest.mark.parametrize(("limit", "kept"), [(None, 2048), (10, 10), (0, 0)])
def test_the_answer_kept_is_as_long_as_the_response_body_limit_setting(
    settings: SettingsWrapper, limit: int | None, kept: int
) -> None:
    if limit is not None:
        settings.WEBHOOKS_RESPONSE_BODY_LIMIT_BYTES = limit
    long = b"HTTP/1.1 500 Oops\r\nContent-Length: 5000\r\n\r\n" + b"y" * 5000
    with Peer.running(answer(long)) as peer:
        result = post(peer.url)
    assert (result.status_code, result.body_excerpt) == (500, "y" * kept)


def test_an_answer_shorter_than_its_content_length_is_recorded_as_broken() -> None:
    short = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this"
    with Peer.running(answer(short, keep=False)) as peer:
        result = post(peer.url)
    assert result.status_code == 200
    assert result.error.startswith("reading the response failed: ProtocolError")
    assert "IncompleteRead" in result.error


def test_a_compressed_answer_is_stored_as_text() -> None:
    packed = gzip.compress(b'{"received": true}')
    reply = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed)
    with Peer.running(answer(reply + packed)) as peer:
        result = post(peer.url)
    assert (result.status_code, result.body_excerpt) == (200, '{"received": true}')


def test_a_silent_peer_is_a_read_timeout_and_its_connection_is_dropped() -> None:
    def silent(head: bytes, body: bytes, connection: socket.socket) -> bool:
        connection.recv(1)  # never answers; returns when the client gives up
        return False

    with Peer.running(silent) as peer:
        result = post(peer.url, read_timeout=0.3)
    assert result.status_code is None
    assert result.error == "ReadTimeoutError: timed out"  # (the innermost reason, as ever)
    assert 250 <= result.duration_ms < 2000


def test_a_peer_that_hangs_up_without_answering_is_a_protocol_error() -> None:
    def hang_up(head: bytes, body: bytes, connection: socket.socket) -> bool:
        return False

    with Peer.running(hang_up) as peer:
        result = post(peer.url)
    assert result.status_code is None
    assert result.error.startswith("ProtocolError: ")
    assert "Remote end closed connection without response" in result.error


def test_a_refused_connection_is_an_error_result() -> None:
    with socket.create_server(("127.0.0.1", 0)) as unused:
        url = f"http://127.0.0.1:{unused.getsockname()[1]}/hook"
    result = post(url)
    assert result.status_code is None
    assert result.error.startswith("NewConnectionError: ")


def test_failed_requests_give_their_connection_slot_back_to_the_pool() -> None:
    def hang_up(head: bytes, body: bytes, connection: socket.socket) -> bool:
        return False

    with Peer.running(hang_up) as peer:
        scheme, host, port, _ = transport._target(peer.url)
        pool = transport._manager(None).connection_from_host(host, port=port, scheme=scheme)
        before = pool.pool.qsize()  # type: ignore[union-attr]
        for _ in range(3):
            assert post(peer.url).status_code is None
        assert pool.pool.qsize() == before  # type: ignore[union-attr]


def test_the_answers_headers_are_kept_for_a_request_that_asks_for_them() -> None:
    reply = (
        b"HTTP/1.1 200 OK\r\nWebHook-Allowed-Origin: a\r\nRetry-After: 7\r\n"
        b"webhook-allowed-origin: b\r\nContent-Length: 0\r\n\r\n"
    )
    with Peer.running(answer(reply)) as peer:
        result = transport.request("OPTIONS", peer.url, {}, connect_timeout=2, read_timeout=2)
        posted = post(peer.url)
    # A repeated header once, its first spelling with its last value (as a proxied
    # request's, through urllib3's header items).
    assert result.headers == {
        "WebHook-Allowed-Origin": "b",
        "Retry-After": "7",
        "Content-Length": "0",
    }
    assert (posted.retry_after, posted.headers) == ("7", {})


def test_a_compressed_answer_never_grows_past_its_excerpt() -> None:
    bomb = gzip.compress(b"a" * 5_000_000)  # 5 MB from a few kilobytes
    reply = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(bomb)
    with Peer.running(answer(reply + bomb)) as peer:
        posted = transport.post(
            peer.url, b"{}", {}, connect_timeout=2, read_timeout=2, excerpt_limit=64
        )
        asked = transport.request("OPTIONS", peer.url, {}, connect_timeout=2, read_timeout=2)
    assert (posted.status_code, posted.body_excerpt) == (200, "a" * 64)
    assert (asked.status_code, asked.body_excerpt) == (200, "")


@pytest.mark.parametrize("head", ENDS_WITH_CONNECTION.values(), ids=ENDS_WITH_CONNECTION.keys())
def test_an_answer_that_ends_with_its_connection_still_ends_by_its_total_deadline(
    head: bytes,
) -> None:
    # http.client lets go of such a connection's socket as the answer starts (the body
    # is read through the response's own handle): the deadline's watchdog once found
    # nothing to shut, and a receiver trickling a byte a second under the read timeout
    # held the request for as long as it liked.
    with trickling(head) as peer:
        result = transport.post(peer.url, b"{}", {}, connect_timeout=0.5, read_timeout=1.0)
    assert result.status_code == 200
    assert "within its total deadline" in result.error
    assert result.duration_ms < 5000


@pytest.mark.parametrize("preload", [False, True], ids=["streamed", "preloaded"])
@pytest.mark.parametrize("head", ENDS_WITH_CONNECTION.values(), ids=ENDS_WITH_CONNECTION.keys())
def test_urllib3s_own_path_through_the_guarded_connections_holds_the_deadline_too(
    head: bytes, preload: bool
) -> None:
    # The guarded connection classes serve urllib3's `urlopen` as well (a pool manager with
    # `ssrf_transport.POOL_CLASSES`), which may read the whole body inside `getresponse`.
    manager = urllib3.PoolManager()
    manager.pool_classes_by_scheme = ssrf_transport.POOL_CLASSES
    deadline = deadlines.arm(deadlines.after(1.0))
    started = time.monotonic()
    try:
        # Cut short, the answer ends: at its end of file, or short of its length.
        with trickling(head) as peer, contextlib.suppress(urllib3.exceptions.HTTPError):
            response = manager.request(
                "GET", peer.url, preload_content=preload, timeout=urllib3.Timeout(1, 1)
            )
            for _ in response.stream(1024):
                pass
    finally:
        cut_short = deadlines.finish(deadline)
    assert cut_short, "the deadline did not cut the request"
    assert time.monotonic() - started < 5
