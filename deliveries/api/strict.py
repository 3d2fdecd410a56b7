"""Request bodies hold the JSON types the schema states, not what DRF would coerce.

DRF takes ``0`` for the string ``"0"``, ``"5"`` for the integer 5, ``"yes"`` or ``1`` for
``true`` and an integer for a UUID: a client whose JSON has the wrong type would have it
stored as something else. The schema says string, integer, number, boolean; so does this.
"""

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ValidationError

_STRING_FIELDS = (
    serializers.CharField,
    serializers.UUIDField,
    serializers.DateTimeField,
    serializers.DateField,
    serializers.TimeField,
    serializers.DurationField,
)


def type_problem(field: serializers.Field[Any, Any, Any, Any], value: Any) -> str | None:
    """Why ``value`` (parsed JSON) is not of the JSON type ``field`` documents, or None."""
    if value is None:
        return None  # null is the field's own business (allow_null)
    if isinstance(field, serializers.BooleanField):
        return None if isinstance(value, bool) else "must be true or false"
    if isinstance(field, serializers.IntegerField):
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else "must be an integer"
    if isinstance(field, serializers.FloatField | serializers.DecimalField):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else "must be a number"
    if isinstance(field, _STRING_FIELDS):
        return None if isinstance(value, str) else "must be a string"
    if isinstance(field, serializers.ListField):
        if not isinstance(value, list):
            return "must be an array"
        for index, item in enumerate(value):
            problem = type_problem(field.child, item)
            if problem:
                return f"item {index} {problem}"
        return None
    if isinstance(field, serializers.DictField):
        if not isinstance(value, dict):
            return "must be an object"
        for key, item in value.items():
            problem = type_problem(field.child, item)
            if problem:
                return f"{key!r} {problem}"
    return None


# A request serializer that refuses values of the wrong JSON type with a 400. (No docstring:
# drf-spectacular would make it the description of every serializer built on this.)
class StrictTypes(serializers.Serializer[Any]):
    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            errors = {
                name: [problem]
                for name, field in self.fields.items()
                if not field.read_only
                and name in data
                and (problem := type_problem(field, data[name])) is not None
            }
            if errors:
                raise ValidationError(errors)
        return super().to_internal_value(data)


class BlankAsNullChoiceField(serializers.ChoiceField):
    """A choice a model stores as "" when unset: served as null, taken as null or "".

    The schema of a choice is its enum; a stored "" would be served as a value outside it.
    """

    def __init__(self, **kwargs: Any) -> None:
        # Served, it is never "" (so the schema of an answer has no blank value).
        kwargs.setdefault("allow_blank", not kwargs.get("read_only", False))
        super().__init__(allow_null=True, **kwargs)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        if data is None:
            return ""
        return super().run_validation(data)

    def to_representation(self, value: Any) -> Any:
        if value in ("", None):
            return None
        return super().to_representation(value)
