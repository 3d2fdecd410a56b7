"""What the tests of the consumer API over real HTTP share: the `web` process's event types,
one request, a polling endpoint made through the API, events emitted and waited for."""

import json
import urllib.error
import urllib.request
from typing import Any
from uuid import UUID

from deliveries import services
from deliveries.models import Endpoint
from deliveries.polling import feed, positions
from tests.conftest import wait_until

# The web process knows the event types the tests emit.
WEB_ENV = {"WEBHOOKS_EVENT_TYPE_MODULES": "tests.event_catalogue"}


def http(
    url: str,
    key: str | None,
    method: str = "GET",
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 40,
) -> tuple[int, Any, dict[str, str]]:
    sent = {"Content-Type": "application/json", **(headers or {})}
    if key:
        sent["Authorization"] = f"Bearer {key}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=sent, method=method)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null"), dict(error.headers)


def poll_endpoint(event_type: str = "invoice.paid") -> Endpoint:
    """A polling endpoint made by the services, subscribed to one event type."""
    endpoint, _ = services.endpoint_create(url="", event_types=[event_type], mode="poll")
    return endpoint


def create_poll_endpoint(web: str, token: str) -> dict[str, Any]:
    status, created, _ = http(
        f"{web}/api/v1/endpoints",
        token,
        "POST",
        {"mode": "poll", "event_types": ["invoice.paid"]},
    )
    assert status == 201, created
    return dict(created)


def emit(count: int) -> list[str]:
    return [
        str(services.emit("invoice.paid", {"invoice": f"in_{n}", "amount": n}).pk)
        for n in range(count)
    ]


def delivered(endpoint_id: str, count: int) -> None:
    """Wait until the fan-out's rows are in the feed: a row is read once every older
    transaction of the database cluster has ended (other tests' too)."""
    wait_until(
        lambda: len(feed.rows_after(UUID(endpoint_id), positions.START, 250)) >= count,
        what="the fan-out",
    )
