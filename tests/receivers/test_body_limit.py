"""413 comes before the body is read: a real HTTP server, a client that never sends it."""

import socket
from typing import Any
from urllib.parse import urlparse

import pytest

from receivers import services


@pytest.mark.django_db(transaction=True)
def test_oversize_declaration_is_refused_without_waiting_for_the_body(live_server: Any) -> None:
    services.source_create(slug="small", scheme="ours", max_body_bytes=1024 * 1024)
    url = urlparse(live_server.url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        # Announce 50 MB and send none of it: a server that read the body would hang here.
        sock.sendall(
            b"POST /receivers/small/ HTTP/1.1\r\n"
            b"Host: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: 52428800\r\n\r\n"
        )
        status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    assert b" 413 " in status_line
