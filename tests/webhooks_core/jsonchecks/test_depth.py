"""The nesting limit on JSON documents, a pure function ."""

import json

import pytest

from webhooks_core.jsonchecks.depth import MAX_DEPTH, too_deep


def nested(depth: int) -> object:
    return json.loads("[" * depth + "]" * depth)


@pytest.mark.parametrize(
    ("value", "deep"),
    [
        (None, False),
        ("text", False),
        ({}, False),
        (nested(MAX_DEPTH), False),
        (nested(MAX_DEPTH + 1), True),
        ({"a": [{"b": nested(MAX_DEPTH - 2)}]}, True),
        ({"a": [{"b": nested(MAX_DEPTH - 3)}]}, False),
        ([1, "x", {"k": None}] * 1000, False),
    ],
)
def test_too_deep(value: object, deep: bool) -> None:
    assert too_deep(value) is deep


def test_much_deeper_than_the_recursion_limit_is_measured_without_recursing() -> None:
    value: list[object] = []
    for _ in range(50_000):
        value = [value]
    assert too_deep(value)
