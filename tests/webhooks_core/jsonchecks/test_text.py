"""The one check of JSON text storability (webhooks_core.jsonchecks.text): pure, no database."""

import pytest

from webhooks_core.jsonchecks.text import unstorable_text


@pytest.mark.parametrize(
    "value",
    [
        "a\x00b",
        {"k\x00": 1},
        {"k": ["ok", {"deep": "\x00"}]},
        ("t", "\x00"),
    ],
)
def test_nul_anywhere_keys_included_is_refused(value: object) -> None:
    assert unstorable_text(value) == "contains U+0000 (NUL)"


@pytest.mark.parametrize("value", ["\ud800", {"\udfff": 1}, [["x", "\ud83d"]]])
def test_a_lone_surrogate_is_refused(value: object) -> None:
    assert unstorable_text(value) == "contains an unpaired surrogate code point"


@pytest.mark.parametrize(
    "value", [None, 1, 1.5, True, "", "é €\U0001f600", {"a": [1, "b", {"c": None}]}]
)
def test_storable_values_pass(value: object) -> None:
    assert unstorable_text(value) is None


def test_depth_costs_no_recursion() -> None:
    deep: object = "\x00"
    for _ in range(5000):
        deep = [deep]
    assert unstorable_text(deep) == "contains U+0000 (NUL)"
