"""The catalogue as a pure module: declarations checked up front, violations named by
field, older versions built from the newest."""

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from deliveries import catalogue
from deliveries.catalogue import Version, declare

PRICE_V2 = {
    "type": "object",
    "required": ["amount", "customer"],
    "properties": {
        "amount": {
            "type": "object",
            "required": ["cents"],
            "properties": {"cents": {"type": "integer"}},
        },
        "customer": {
            "type": "object",
            "required": ["email"],
            "properties": {"email": {"type": "string", "format": "email"}},
        },
    },
}
PRICE_V1 = {"type": "object", "required": ["cents"], "properties": {"cents": {"type": "integer"}}}
EXAMPLE_V2 = {"amount": {"cents": 5}, "customer": {"email": "a@example.com"}}


def v1_from_v2(data: dict[str, Any]) -> dict[str, Any]:
    return {"cents": data["amount"]["cents"]}


@pytest.fixture
def declared() -> Iterator[catalogue.EventType]:
    event_type = declare(
        "unit.priced",
        description="d",
        versions=[
            Version(1, schema=PRICE_V1, example={"cents": 5}, from_newer=v1_from_v2),
            Version(2, schema=PRICE_V2, example=EXAMPLE_V2),
        ],
    )
    yield event_type
    catalogue.forget("unit.priced")


def test_violations_name_the_failing_field(declared: catalogue.EventType) -> None:
    assert declared.problem(EXAMPLE_V2, 2) is None
    field, message = declared.problem({**EXAMPLE_V2, "amount": {"cents": "5"}}, 2)  # type: ignore[misc]
    assert field == "data.amount.cents"
    assert "integer" in message
    field, message = declared.problem({"amount": {"cents": 5}}, 2)  # type: ignore[misc]
    assert (field, message) == ("data.customer", "'customer' is a required property")
    field, _ = declared.problem({**EXAMPLE_V2, "customer": {"email": "not-an-email"}}, 2)  # type: ignore[misc]
    assert field == "data.customer.email"
    field, _ = declared.problem([], 2)  # type: ignore[misc]
    assert field == "data"


def test_older_versions_are_built_from_the_newest_never_upgraded(
    declared: catalogue.EventType,
) -> None:
    assert declared.render(EXAMPLE_V2, stored=2, wanted=1) == (1, {"cents": 5})
    assert declared.render(EXAMPLE_V2, stored=2, wanted=2) == (2, EXAMPLE_V2)
    assert declared.render(EXAMPLE_V2, stored=2, wanted=None) == (2, EXAMPLE_V2)
    assert declared.render(EXAMPLE_V2, stored=2, wanted=7) == (2, EXAMPLE_V2)
    assert declared.render({"cents": 5}, stored=1, wanted=2) == (1, {"cents": 5})


def test_three_versions_chain_their_builders() -> None:
    declare(
        "unit.chain",
        description="d",
        versions=[
            Version(1, schema={}, example={}, from_newer=lambda d: {"v": 1, "from": d["v"]}),
            Version(2, schema={}, example={}, from_newer=lambda d: {"v": 2, "from": d["v"]}),
            Version(3, schema={}, example={"v": 3}),
        ],
    )
    try:
        assert catalogue.get("unit.chain").render({"v": 3}, stored=3, wanted=1) == (  # type: ignore[union-attr]
            1,
            {"v": 1, "from": 2},
        )
    finally:
        catalogue.forget("unit.chain")


@pytest.mark.parametrize(
    ("name", "versions", "complaint"),
    [
        ("bad name", [Version(1, schema={}, example={})], "not a valid event-type name"),
        ("a.*", [Version(1, schema={}, example={})], "not a valid event-type name"),
        ("unit.none", [], "numbered"),
        ("unit.gap", [Version(2, schema={}, example={})], "numbered"),
        (
            "unit.no_builder",
            [Version(1, schema={}, example={}), Version(2, schema={}, example={})],
            "from_newer",
        ),
        ("unit.bad_example", [Version(1, schema=PRICE_V1, example={"cents": "x"})], "example"),
        (
            "unit.bad_builder",
            [
                Version(1, schema=PRICE_V1, example={"cents": 1}, from_newer=lambda d: {}),
                Version(2, schema=PRICE_V2, example=EXAMPLE_V2),
            ],
            "from_newer builds invalid data",
        ),
    ],
)
def test_wrong_declarations_are_refused_at_import(
    name: str, versions: list[Version], complaint: str
) -> None:
    with pytest.raises(ImproperlyConfigured, match=complaint):
        declare(name, description="d", versions=versions)
    assert catalogue.get(name) is None


def test_invalid_schema_and_duplicates_are_refused(declared: catalogue.EventType) -> None:
    with pytest.raises(ImproperlyConfigured, match="invalid schema"):
        Version(1, schema={"type": "no-such-type"}, example={})
    with pytest.raises(ImproperlyConfigured, match="declared twice"):
        declare("unit.priced", description="d", versions=[Version(1, schema={}, example={})])


def test_filters_must_name_a_declared_type(declared: catalogue.EventType) -> None:
    assert catalogue.filter_problem("unit.priced") is None
    assert catalogue.filter_problem("unit.*") is None
    assert catalogue.filter_problem("*") is None
    assert "matches no declared event type" in (catalogue.filter_problem("unit.pricy") or "")
    assert "matches no declared event type" in (catalogue.filter_problem("nothing.*") or "")
