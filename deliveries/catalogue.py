"""The event-type catalogue: which events exist, what their `data` looks like, per version.

Types are declared in code, once, at import time (an app's ``webhook_events`` module is
imported automatically, see ``DeliveriesConfig.ready``)::

    from deliveries.catalogue import Version, declare

    declare(
        "invoice.paid",
        description="An invoice was paid in full.",
        versions=[
            Version(1, schema={...}, example={...}, from_newer=lambda v2: {...}),
            Version(2, schema={...}, example={...}),
        ],
    )

Events are stored in the newest version. An older version says how to build its data
from the next newer one (``from_newer``); chained, any older version can be built from
the newest, so adding version 3 later only needs a 2-from-3 function. Declarations are
checked when they are made: consecutive versions, valid JSON Schemas, examples that
match them, and each ``from_newer`` turning the newer example into valid older data.

Pure module: no ORM. ``jsonschema`` does the validation (Draft 2020-12, with formats).
"""

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.exceptions import ValidationError as SchemaViolation

from deliveries.pipeline import event_types

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$")


@dataclass(frozen=True)
class Version:
    """One version of an event type's `data`."""

    number: int
    schema: dict[str, Any]
    example: Any
    #: Builds this version's data from the next newer version's data; None for the newest.
    from_newer: Callable[[Any], Any] | None = None
    validator: Draft202012Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            Draft202012Validator.check_schema(self.schema)
        except SchemaError as exc:
            raise ImproperlyConfigured(
                f"version {self.number}: invalid schema: {exc.message}"
            ) from None
        validator = Draft202012Validator(
            self.schema, format_checker=Draft202012Validator.FORMAT_CHECKER
        )
        object.__setattr__(self, "validator", validator)


@dataclass(frozen=True)
class EventType:
    name: str
    description: str
    versions: tuple[Version, ...]

    @property
    def newest(self) -> Version:
        return self.versions[-1]

    def version(self, number: int) -> Version | None:
        if 1 <= number <= len(self.versions):
            return self.versions[number - 1]
        return None

    def problem(self, data: Any, number: int) -> tuple[str, str] | None:
        """(field, message) of the most relevant schema violation, or None when valid."""
        version = self.version(number)
        if version is None:
            return "version", f"{self.name} has no version {number}"
        error = best_match(version.validator.iter_errors(data))
        if error is None:
            return None
        return _field_of(error), error.message

    def render(self, data: Any, *, stored: int, wanted: int | None) -> tuple[int, Any]:
        """The data of version ``wanted``, built from data stored in version ``stored``.

        Only older versions can be built (an event is never upgraded): when ``wanted`` is
        None, unknown or not older than what is stored, the stored version is returned.
        """
        if wanted is None or wanted >= stored or self.version(wanted) is None:
            return stored, data
        for number in range(stored - 1, wanted - 1, -1):
            builder = self.versions[number - 1].from_newer
            assert builder is not None  # checked by declare()
            data = builder(data)
        return wanted, data


def _field_of(error: SchemaViolation) -> str:
    """`data.customer.email` for a violation there; a missing property is named too."""
    path = [str(part) for part in error.absolute_path]
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [name for name in error.validator_value if name not in error.instance]
        if missing:
            path.append(str(missing[0]))
    return ".".join(["data", *path])


_registry: dict[str, EventType] = {}


def declare(name: str, *, description: str, versions: Sequence[Version]) -> EventType:
    """Add an event type to the catalogue. Raises ImproperlyConfigured when it is wrong."""
    if not NAME.match(name) or "*" in name:
        raise ImproperlyConfigured(f"{name!r} is not a valid event-type name (e.g. invoice.paid)")
    if name in _registry:
        raise ImproperlyConfigured(f"event type {name!r} is declared twice")
    ordered = tuple(versions)
    if not ordered or [v.number for v in ordered] != list(range(1, len(ordered) + 1)):
        raise ImproperlyConfigured(f"{name}: versions must be numbered 1, 2, 3, … in order")
    for older, newer in itertools.pairwise(ordered):
        if older.from_newer is None:
            raise ImproperlyConfigured(
                f"{name} v{older.number}: from_newer (build it from v{newer.number}) is missing"
            )
    if ordered[-1].from_newer is not None:
        raise ImproperlyConfigured(f"{name}: the newest version has nothing to be built from")
    event_type = EventType(name=name, description=description, versions=ordered)
    _check_examples(event_type)
    _registry[name] = event_type
    return event_type


def _check_examples(event_type: EventType) -> None:
    for version in event_type.versions:
        problem = event_type.problem(version.example, version.number)
        if problem:
            raise ImproperlyConfigured(
                f"{event_type.name} v{version.number}: the example is invalid: "
                f"{problem[0]}: {problem[1]}"
            )
    newest = event_type.newest
    for version in event_type.versions[:-1]:
        _, built = event_type.render(newest.example, stored=newest.number, wanted=version.number)
        problem = event_type.problem(built, version.number)
        if problem:
            raise ImproperlyConfigured(
                f"{event_type.name} v{version.number}: from_newer builds invalid data from the "
                f"newest example: {problem[0]}: {problem[1]}"
            )


def get(name: str) -> EventType | None:
    return _registry.get(name)


def all_types() -> list[EventType]:
    return sorted(_registry.values(), key=lambda t: t.name)


def names() -> list[str]:
    return sorted(_registry)


def filter_problem(pattern: str) -> str | None:
    """Why an endpoint filter is refused: it must name at least one declared type.

    ``*`` always passes: it subscribes to whatever is declared, now or later.
    """
    if pattern == event_types.WILDCARD:
        return None
    if any(event_types.matches(name, [pattern]) for name in _registry):
        return None
    return f"{pattern!r} matches no declared event type (see GET /api/v1/event-types)"


def matching(patterns: Iterable[str]) -> list[EventType]:
    patterns = list(patterns)
    return [t for t in all_types() if event_types.matches(t.name, patterns)]


def forget(name: str) -> None:
    """Remove a declaration (tests that declare throw-away types clean up with this)."""
    _registry.pop(name, None)
