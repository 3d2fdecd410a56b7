"""The iterator's encoding and the request's bounds: pure functions."""

import base64
import json
from datetime import UTC, datetime

import pytest

from deliveries.polling import params, positions
from deliveries.polling.positions import Cursor, InvalidIterator, Position

ENDPOINT = "0b7c4b8e-6d1e-4a38-9f35-2a1c3f0e9d11"


def test_an_iterator_gives_back_its_position_and_time() -> None:
    cursor = Cursor(ENDPOINT, Position(123456789012, 42), 1765000000.5)
    token = positions.encode(cursor)
    assert token.startswith("it1_")
    assert positions.decode(token, endpoint_id=ENDPOINT) == cursor


def test_positions_order_by_transaction_then_id() -> None:
    assert Position(5, 100) < Position(6, 1) < Position(6, 2)
    assert Position(0, 1) > positions.START


@pytest.mark.parametrize(
    "token",
    [
        "",
        "it1_",
        "it1_%%%",
        "nope",
        "it1_" + base64.urlsafe_b64encode(b"[1,2]").decode(),
        "it1_" + base64.urlsafe_b64encode(json.dumps([ENDPOINT, -1, 2, 0]).encode()).decode(),
        "it1_" + base64.urlsafe_b64encode(json.dumps([ENDPOINT, "1", 2, 0]).encode()).decode(),
        "it1_" + base64.urlsafe_b64encode(json.dumps([ENDPOINT, True, 2, 0]).encode()).decode(),
        "it1_" + base64.urlsafe_b64encode(json.dumps({"a": 1}).encode()).decode(),
        "it1_" + base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        "it1_" + "A" * 400,
    ],
)
def test_a_malformed_iterator_is_refused(token: str) -> None:
    with pytest.raises(InvalidIterator):
        positions.decode(token, endpoint_id=ENDPOINT)


def test_another_endpoints_iterator_is_refused() -> None:
    token = positions.encode(Cursor("another", Position(1, 1), 0))
    with pytest.raises(InvalidIterator, match="another endpoint"):
        positions.decode(token, endpoint_id=ENDPOINT)


def test_an_iterator_older_than_the_retention_has_expired() -> None:
    cursor = Cursor(ENDPOINT, Position(1, 1), at=1000.0)
    assert positions.expired(cursor, now=1000.0 + 86400 + 1, retention_seconds=86400)
    assert not positions.expired(cursor, now=1000.0 + 86400 - 1, retention_seconds=86400)


def test_the_defaults_and_bounds_of_a_read() -> None:
    read = params.read_params({}, group=False)
    assert (read.limit, read.wait, read.iterator, read.after) == (50, 0.0, None, None)
    assert params.read_params({}, group=True).lease == 30.0
    assert params.read_params({"limit": "250", "wait": "30"}, group=False).limit == 250
    after = params.read_params({"after": "2026-04-15T10:12:34Z"}, group=False).after
    assert after == datetime(2026, 4, 15, 10, 12, 34, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "group", "field"),
    [
        ({"limit": "0"}, False, "limit"),
        ({"limit": "251"}, False, "limit"),
        ({"limit": "1.5"}, False, "limit"),
        ({"wait": "31"}, False, "wait"),
        ({"wait": "nan"}, False, "wait"),
        ({"wait": "-1"}, True, "wait"),
        ({"lease": "0.5"}, True, "lease"),
        ({"lease": "301"}, True, "lease"),
        ({"after": "yesterday"}, False, "after"),
        ({"after": "2026-04-15T10:12:34"}, False, "after"),
        ({"iterator": "x", "after": "2026-04-15T10:12:34Z"}, False, "after"),
        ({"limti": "5"}, False, "limti"),
        ({"iterator": "x"}, True, "iterator"),
    ],
)
def test_a_parameter_out_of_bounds_is_refused(
    query: dict[str, str], group: bool, field: str
) -> None:
    with pytest.raises(params.InvalidParams) as caught:
        params.read_params(query, group=group)
    assert field in caught.value.errors


def test_consumer_names() -> None:
    assert params.name_problem("billing-sync.v2_1") is None
    for bad in ("", "a" * 101, "has space", "é"):
        assert params.name_problem(bad)
