"""The web process's connections take turns (webhooks_project/web_worker.py): a client whose
next requests are already waiting on its keep-alive connection does not hold the process
while another connection's request waits."""

import contextlib
import socket
import threading
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.helpers import procfile_web as web
from tests.helpers import read_until_closed

pytestmark = pytest.mark.django_db(transaction=True)

PIPELINED = 5000


def request(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


def test_a_pipelining_client_does_not_hold_the_process_from_another_connection(
    tmp_path: Path,
) -> None:
    # One gevent worker (the helper's WEB_CONCURRENCY=1), so both connections share it.
    with web(tmp_path, SECURE_SSL_REDIRECT="false") as (base, log):
        address = ("127.0.0.1", int(base.rsplit(":", 1)[1]))
        busy, other = socket.create_connection(address), socket.create_connection(address)
        stop = threading.Event()
        readers = [
            threading.Thread(target=read_until_closed, args=(s, stop)) for s in (busy, other)
        ]
        try:
            for reader in readers:
                reader.start()
            # Both connections served once: each has its greenlet, waiting for a request.
            busy.sendall(request("/healthz?warm=busy"))
            other.sendall(request("/healthz?warm=other"))
            wait_until(lambda: log.read_text().count("warm=") == 2, what="the warm-up requests")
            # The busy client's requests are all sent, and being served, before the other
            # connection's one: without taking turns, the other is served after them all.
            busy.sendall(b"".join(request(f"/healthz?busy={n}") for n in range(PIPELINED)))
            wait_until(lambda: "busy=0 " in log.read_text(), what="the busy client served")
            other.sendall(request("/healthz?other"))
            # At most this many of the busy ones were served before the other request came.
            served_by_then = log.read_text().count("/healthz?busy=")
            wait_until(
                lambda: (
                    "/healthz?other " in log.read_text()
                    and f"busy={PIPELINED - 1} " in log.read_text()
                ),
                what="every request answered",
            )
        finally:
            stop.set()
            for sock in (busy, other):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            for reader in readers:
                reader.join(timeout=5)
    served = [
        line
        for line in log.read_text().splitlines()
        if "/healthz?busy=" in line or "/healthz?other " in line
    ]
    position = next((n for n, line in enumerate(served) if "/healthz?other " in line), None)
    assert position is not None, "the other connection's request was not served"
    # The busy client still had thousands to go when the other request came; it was served
    # next or nearly, not after the busy client's last.
    assert served_by_then < PIPELINED - 1000, "the busy client's requests went too fast to test"
    assert position <= served_by_then + 50, f"served after {position} of the busy client's"
