"""`webhooks_core.runtime.cooperative`, and the dropped-connection check urllib3 asks of our
connections before it reuses one: in this process (threads) and under gevent's patching
(a process of its own, as the delivery worker runs)."""

import contextvars
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Generator

from urllib3.util.wait import wait_for_read

from tests.conftest import wait_until
from webhooks_core.egress import ssrf_transport
from webhooks_core.egress.ssrf import AddressPolicy
from webhooks_core.egress.ssrf_transport import GuardedHTTPConnection, address_policy
from webhooks_core.runtime import cooperative


def test_readable_now_says_whether_the_peer_said_something_or_left() -> None:
    ours, peer = socket.socketpair()
    with ours, peer:
        assert not cooperative.readable_now(ours.fileno())
        peer.sendall(b"x")
        assert cooperative.readable_now(ours.fileno())
        ours.recv(1)
        assert not cooperative.readable_now(ours.fileno())
        peer.close()
        assert cooperative.readable_now(ours.fileno())


def test_start_beside_runs_the_target_without_waiting_for_it() -> None:
    release, ran = threading.Event(), threading.Event()

    def target() -> None:
        release.wait(5)
        ran.set()

    cooperative.start_beside(target)  # returns while the target still waits
    assert not ran.is_set()
    release.set()
    wait_until(ran.is_set, timeout=5)


def test_a_kept_alive_connection_the_server_closed_is_not_reused() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        conn = GuardedHTTPConnection("127.0.0.1", server.getsockname()[1])
        conn.connect()
        accepted, _ = server.accept()
        try:
            assert conn.is_connected
            assert conn.sock is not None
            # As urllib3's own check says (the one ours replaces).
            assert not wait_for_read(conn.sock, timeout=0.0)
            accepted.close()
            wait_until(lambda: not conn.is_connected, timeout=5)
        finally:
            conn.close()
    assert not conn.is_connected  # no socket at all


GEVENT_CHECK = textwrap.dedent(
    """
    from gevent import monkey
    monkey.patch_all()
    import socket, threading, gevent
    from webhooks_core.runtime import cooperative

    from gevent.event import Event
    release, done = Event(), []
    before = threading.active_count()
    cooperative.start_beside(lambda: done.append(release.wait(5)))
    gevent.sleep(0.05)
    # Running, as a raw greenlet: no thread was registered for it.
    assert threading.active_count() == before, threading.enumerate()
    release.set()
    gevent.sleep(0.05)
    assert done == [True], done

    import select

    def cooperative_poll():
        raise AssertionError("gevent's poll was asked")

    select.poll = cooperative_poll  # (what the patched module offers is not used)
    ours, peer = socket.socketpair()
    assert not cooperative.readable_now(ours.fileno())
    peer.close()
    assert cooperative.readable_now(ours.fileno())
    print("ok")
    """
)


def test_under_gevent_a_raw_greenlet_and_the_operating_systems_poll() -> None:
    done = subprocess.run(
        [sys.executable, "-c", GEVENT_CHECK], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_an_address_policy_block_closed_in_another_context_restores_quietly() -> None:
    # The receiving side's reconciliation holds the block open across a generator's
    # yields; such a generator may be closed in another context (another thread, the
    # garbage collector), where resetting a context variable by its token raises and
    # hides the error that closed it.
    policy = AddressPolicy(require_https=False)

    def pages() -> Generator[int, None, None]:
        with address_policy(policy):
            yield 1

    opened = pages()
    contextvars.copy_context().run(next, opened)  # entered in a context of its own
    opened.close()  # closed here
    assert ssrf_transport._policy.get() is None
