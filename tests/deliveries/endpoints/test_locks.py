"""An endpoint's row lock never stalls the product: a change resolves its host names before
it locks the row, and locks it FOR NO KEY UPDATE, which the foreign-key check of a new
delivery (FOR KEY SHARE) does not wait for; an emit never waits on an operator's change."""

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection

from deliveries import services
from deliveries.models import ApiToken, Delivery, Endpoint
from tests.fixtures import api_client, new_endpoint
from tests.helpers import database_url
from tests.receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)

# Long enough for a loaded machine, far shorter than a lock held for the whole test.
PROMPTLY = 10.0


@contextlib.contextmanager
def row_locked(endpoint: Endpoint, mode: str) -> Iterator[None]:
    """The endpoint's row held `mode` ("NO KEY UPDATE", "KEY SHARE") by a transaction of
    another connection until the block ends."""
    table = Endpoint._meta.db_table
    with psycopg.connect(database_url()) as other:
        other.execute(
            f"SELECT id FROM {table} WHERE id = %s FOR {mode}",  # noqa: S608 (our table)
            [endpoint.pk],
        )
        try:
            yield
        finally:
            other.rollback()


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except Exception as exc:  # (asserted by the test)
            box["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def finishes_promptly(call: Callable[[], Any]) -> Any:
    thread, box = in_thread(call)
    thread.join(PROMPTLY)
    assert not thread.is_alive(), f"still waiting after {PROMPTLY}s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


@contextlib.contextmanager
def resolver_that_blocks(monkeypatch: pytest.MonkeyPatch, name: str) -> Iterator[threading.Event]:
    """`name` resolves (to 127.0.0.1) only once the yielded event is set; the returned
    event's `entered` attribute tells that a resolution is waiting."""
    release = threading.Event()
    entered = threading.Event()
    suite_resolver = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == name:
            entered.set()
            release.wait(60)
            host = "127.0.0.1"
        return suite_resolver(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    release.entered = entered  # type: ignore[attr-defined]
    try:
        yield release
    finally:
        release.set()


@pytest.mark.usefixtures("inline_fan_out")  # the emitting process reads the endpoints
def test_an_emit_is_not_held_by_the_endpoint_s_row_held_for_no_key_update(
    receiver: Receiver,
) -> None:
    endpoint = new_endpoint(receiver.url)
    _, token = ApiToken.issue("tests")
    api = api_client(token)

    with row_locked(endpoint, "NO KEY UPDATE"):
        event = finishes_promptly(lambda: services.emit("order.created", {"id": 1}))
        assert Delivery.objects.filter(event=event, endpoint=endpoint).exists()
        response = finishes_promptly(
            lambda: api.post(
                "/api/v1/events",
                {"type": "order.created", "data": {"id": 2}},
                format="json",
            )
        )
        assert response.status_code == 202, response.content
        made = response.json()["id"]
        assert Delivery.objects.filter(event_id=made, endpoint=endpoint).exists()


@pytest.mark.usefixtures("inline_fan_out")  # the emitting process reads the endpoints
def test_an_emit_is_not_held_by_an_update_resolving_a_new_url(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = new_endpoint(receiver.url)
    new_url = f"http://slow.example:{receiver.port}/hook"
    with resolver_that_blocks(monkeypatch, "slow.example") as release:
        update, answer = in_thread(lambda: services.endpoint_update(endpoint=endpoint, url=new_url))
        assert release.entered.wait(PROMPTLY)  # type: ignore[attr-defined]

        event = finishes_promptly(lambda: services.emit("order.created", {"id": 1}))
        assert Delivery.objects.filter(event=event, endpoint=endpoint).exists()

        release.set()
        update.join(PROMPTLY)
    assert not update.is_alive()
    assert "error" not in answer, answer
    assert Endpoint.objects.get(pk=endpoint.pk).url == new_url


def test_an_update_does_not_wait_for_a_transaction_that_made_a_delivery(
    receiver: Receiver,
) -> None:
    # An open product transaction whose new delivery's foreign-key check holds the
    # endpoint's row FOR KEY SHARE until it commits.
    endpoint = new_endpoint(receiver.url)
    with row_locked(endpoint, "KEY SHARE"):
        finishes_promptly(
            lambda: services.endpoint_update(endpoint=endpoint, description="renamed")
        )
        assert finishes_promptly(lambda: services.endpoint_tenant_disable(endpoint_id=endpoint.pk))
    assert Endpoint.objects.get(pk=endpoint.pk).description == "renamed"
