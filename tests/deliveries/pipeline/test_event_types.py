"""Event-type filters: exact names, `prefix.*` and `*`."""

import pytest

from deliveries.pipeline.event_types import matches, validate_filter


@pytest.mark.parametrize(
    "pattern", ["*", "invoice.paid", "invoice.*", "invoice", "a.b.c", "a.b.*", "user_2.created-v2"]
)
def test_valid_filters(pattern: str) -> None:
    assert validate_filter(pattern) is None


@pytest.mark.parametrize(
    "pattern",
    [
        "",
        " ",
        " invoice.paid",
        "invoice.paid ",
        "invoice paid",
        "invoice.\tpaid",
        "invoice.pa\nid",
        "**",
        "*.*",
        ".*",
        "invoice*",
        "invoice.*.*",
        "*.paid",
        "invoice.p*d",
        "invoice..paid",
        ".invoice",
        "invoice.",
    ],
)
def test_invalid_filters_have_a_message(pattern: str) -> None:
    problem = validate_filter(pattern)
    assert isinstance(problem, str)
    assert problem


@pytest.mark.parametrize("pattern", [None, 5, ["invoice.paid"], {"a": 1}])
def test_non_strings_are_invalid(pattern: object) -> None:
    assert validate_filter(pattern) is not None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("event_type", "patterns", "expected"),
    [
        ("invoice.paid", ["invoice.paid"], True),
        ("invoice.paid", ["invoice.created"], False),
        ("invoice.paid", ["invoice.*"], True),
        ("invoice.paid.late", ["invoice.*"], True),
        ("invoice", ["invoice.*"], False),
        ("invoices.paid", ["invoice.*"], False),
        ("invoice.paid", ["*"], True),
        ("anything", ["*"], True),
        ("invoice.paid", [], False),
        ("invoice.paid", ["customer.*", "invoice.paid"], True),
        ("customer.created", ["customer.*", "invoice.paid"], True),
        ("order.created", ["customer.*", "invoice.paid"], False),
        ("invoice.paid", ["invoice"], False),
        ("invoice.paid", ["Invoice.paid"], False),
    ],
)
def test_matches(event_type: str, patterns: list[str], expected: bool) -> None:
    assert matches(event_type, patterns) is expected


def test_matches_accepts_any_iterable() -> None:
    assert matches("a.b", (p for p in ["x", "a.*"]))
