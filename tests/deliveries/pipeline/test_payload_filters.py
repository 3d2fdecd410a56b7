"""Payload filters: the language, its validation errors and its bounds. Pure, no database."""

import time
from typing import Any

import pytest

from deliveries.pipeline import payload_filters
from deliveries.pipeline.payload_filters import FilterError, compile_filter

EVENT: dict[str, Any] = {
    "id": "0b0e7f5c-0000-4000-8000-000000000001",
    "type": "invoice.paid",
    "version": 1,
    "occurred_at": "2026-04-15T10:12:34Z",
    "data": {
        "amount": 250,
        "currency": "EUR",
        "customer": {"vip": False, "email": "ann@example.com", "tags": ["b2b", "eu"]},
        "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}],
        "note": None,
        "2026": "numeric key",
    },
}


def matches(document: Any, event: dict[str, Any] = EVENT) -> bool:
    return compile_filter(document)(event)


def test_the_issue_example() -> None:
    document = {
        "data.amount": {"$gte": 100},
        "data.currency": {"$in": ["EUR", "USD"]},
        "data.customer.vip": {"$exists": True},
    }
    assert matches(document)
    assert not matches({**document, "data.amount": {"$gte": 1000}})


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (None, True),
        ({}, True),
        ({"type": "invoice.paid"}, True),  # a bare value means $eq
        ({"type": "invoice.voided"}, False),
        ({"data.amount": {"$eq": 250.0}}, True),  # JSON numbers: 250 == 250.0
        ({"data.customer.vip": 0}, False),  # but false is not 0
        ({"data.customer.vip": False}, True),
        ({"data.note": None}, True),
        ({"data.note": {"$exists": True}}, True),  # null is present
        ({"data.missing": None}, False),  # missing is not null
        ({"data.missing": {"$exists": False}}, True),
        ({"data.amount": {"$exists": False}}, False),
        ({"data.amount": {"$ne": 250}}, False),
        ({"data.missing": {"$ne": 250}}, True),
        ({"data.currency": {"$nin": ["USD", "GBP"]}}, True),
        ({"data.missing": {"$nin": ["USD"]}}, True),
        ({"data.missing": {"$in": ["USD"]}}, False),
        ({"data.amount": {"$gt": 250}}, False),
        ({"data.amount": {"$gt": 249.5, "$lte": 250}}, True),
        ({"data.amount": {"$lt": 100}}, False),
        ({"data.currency": {"$gt": 100}}, False),  # a string is not compared with a number
        ({"occurred_at": {"$gte": "2026-04-01T00:00:00Z"}}, True),  # ISO times as strings
        ({"occurred_at": {"$lt": "2026-04-01T00:00:00Z"}}, False),
        ({"data.customer.email": {"$regex": "@example\\.com$"}}, True),
        ({"data.customer.email": {"$regex": "^ANN"}}, False),
        ({"data.customer.email": {"$regex": "(?i)^ANN"}}, True),
        ({"data.amount": {"$regex": "250"}}, False),  # only strings are searched
        ({"data.lines.1.sku": "B-7"}, True),  # a numeric segment indexes a list
        ({"data.lines.5.sku": {"$exists": True}}, False),
        ({"data.2026": "numeric key"}, True),  # and is a key in an object
        ({"data.customer.tags": ["b2b", "eu"]}, True),  # lists compare whole
        ({"data.customer.tags": ["eu", "b2b"]}, False),
        ({"data.customer": {"vip": False}}, False),  # so do objects
        ({"data.lines.0": {"sku": "A-1", "qty": 2}}, True),
        ({"data.currency": {"$in": [["EUR"], "EUR"]}}, True),
        ({"data.lines.0": {"$in": [{"qty": 2, "sku": "A-1"}]}}, True),
        ({"data.amount.deeper": 1}, False),  # a path through a scalar is missing
        ({"$or": [{"data.amount": {"$gt": 1000}}, {"data.currency": "EUR"}]}, True),
        ({"$or": [{"data.amount": {"$gt": 1000}}, {"data.currency": "USD"}]}, False),
        ({"$and": [{"data.amount": {"$gt": 100}}, {"data.currency": "EUR"}]}, True),
        ({"$and": [{"data.amount": {"$gt": 100}}], "type": "other"}, False),
        ({"$or": [{"$and": [{"type": "invoice.paid"}, {"data.amount": 250}]}]}, True),
    ],
)
def test_semantics(document: Any, expected: bool) -> None:
    assert matches(document) is expected


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "filter: must be a JSON object"),
        ("type", "filter: must be a JSON object"),
        ({"data.amount": {"$gte": "a"}}, None),  # strings compare with strings: valid
        ({"data.amount": {"$gte": True}}, "filter.data.amount.$gte: must be a number or a string"),
        ({"data.amount": {"$gte": None}}, "filter.data.amount.$gte: must be a number or a string"),
        ({"data.currency": {"$in": "EUR"}}, "filter.data.currency.$in: must be a list"),
        ({"data.currency": {"$nin": {}}}, "filter.data.currency.$nin: must be a list"),
        ({"data.x": {"$exists": 1}}, "filter.data.x.$exists: must be true or false"),
        ({"data.x": {"$regex": 1}}, "filter.data.x.$regex: must be a string"),
        ({"data.x": {"$regex": "(a"}}, "filter.data.x.$regex: not a valid RE2 pattern"),
        ({"data.x": {"$regex": "(a)\\1"}}, "filter.data.x.$regex: not a valid RE2 pattern"),
        ({"data.x": {"$regex": "(?=a)"}}, "filter.data.x.$regex: not a valid RE2 pattern"),
        ({"data.x": {"$regex": "a" * 257}}, "filter.data.x.$regex: is longer than 256"),
        ({"data.x": {"$like": 1}}, "filter.data.x.$like: unknown operator"),
        ({"data.x": {"$eq": 1, "y": 2}}, "filter.data.x.y: cannot mix operators and fields"),
        ({"$not": {}}, "filter.$not: unknown operator"),
        ({"$or": []}, "filter.$or: must be a non-empty list of filters"),
        ({"$or": {"a": 1}}, "filter.$or: must be a non-empty list of filters"),
        ({"$or": [{"a": 1}, 3]}, "filter.$or[1]: must be a JSON object"),
        (
            {"$and": [{"$or": [{"data.amount": {"$lt": []}}]}]},
            "filter.$and[0].$or[0].data.amount.$lt: must be a number or a string",
        ),
        ({"": 1}, "filter.: a path must not be empty"),
        ({"data..x": 1}, "filter.data..x: a path has no empty segments"),
        ({"a" * 300: 1}, "a path is at most 256 characters"),
        ({".".join("a" * 17): 1}, "a path has at most 16 segments"),
        ({"x": float("nan")}, "filter: must be plain JSON"),
        ({"x": {"$in": list(range(257))}}, "filter.x.$in: holds at most 256 values"),
        ({f"k{i}": i for i in range(65)}, "filter.k64: a filter holds at most 64 conditions"),
        ({"x": "y" * 9000}, "filter: is longer than 8192 bytes as JSON"),
    ],
)
def test_validation_names_the_path(document: Any, message: str | None) -> None:
    if message is None:
        payload_filters.validate(document)
        return
    with pytest.raises(FilterError) as error:
        payload_filters.validate(document)
    assert message in str(error.value)
    assert str(error.value).startswith(error.value.path + ": ")


def test_nesting_is_bounded() -> None:
    document: dict[str, Any] = {"type": "x"}
    for _ in range(7):
        document = {"$or": [document]}
    with pytest.raises(FilterError, match="nests deeper than 6 levels"):
        payload_filters.validate(document)
    value: Any = 1
    for _ in range(8):
        value = [value]
    with pytest.raises(FilterError, match="a value nests deeper than 6 levels"):
        payload_filters.validate({"x": value})


def test_very_deep_json_is_refused_not_crashed() -> None:
    value: Any = 1
    for _ in range(100_000):
        value = [value]
    with pytest.raises(FilterError):
        payload_filters.validate({"x": value})


def test_a_catastrophic_pattern_runs_in_linear_time() -> None:
    # (a+)+$ backtracks exponentially in Python's re; RE2 does not backtrack.
    predicate = compile_filter({"data.s": {"$regex": "(a+)+$"}})
    started = time.perf_counter()
    assert not predicate({"data": {"s": "a" * 100_000 + "!"}})
    assert time.perf_counter() - started < 0.5


def test_cached_predicate_compiles_each_filter_once() -> None:
    payload_filters._compiled.clear()
    first = payload_filters.cached_predicate({"type": "a", "data.x": 1})
    assert payload_filters.cached_predicate({"type": "a", "data.x": 1}) is first
    # Python says 1 == True; the cache does not mix the two filters up.
    as_bool = payload_filters.cached_predicate({"type": "a", "data.x": True})
    assert as_bool is not first
    assert first({"type": "a", "data": {"x": 1}})
    assert not as_bool({"type": "a", "data": {"x": 1}})
    assert payload_filters.cached_predicate(None)({}) is True
    assert payload_filters.cached_predicate({})({}) is True
