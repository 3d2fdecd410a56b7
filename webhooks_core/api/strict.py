"""Request bodies hold the fields and the JSON types the schema states, nothing else.

A field the API does not know (a typo such as ``max_inflight``, or a feature of another
version) is refused with a 400 naming it, in nested objects too: dropping it in silence
would let a caller believe a setting took effect. A read-only field sent back unchanged
(a client PATCHing what it read) is accepted; changed, it is refused. On creation the
read-only fields are ignored (nothing exists yet to compare them with).

DRF takes ``0`` for the string ``"0"``, ``"5"`` for the integer 5, ``"yes"`` or ``1`` for
``true`` and an integer for a UUID: a client whose JSON has the wrong type would have it
stored as something else. The schema says string, integer, number, boolean; so does this.
"""

import json
from collections.abc import Mapping
from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.utils.encoders import JSONEncoder

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


UNKNOWN_FIELD = "Unknown field."
READ_ONLY_FIELD = "This field is read-only; leave it out or send it back unchanged."


def unknown_fields(known: Mapping[str, Any], data: Mapping[Any, Any]) -> dict[str, Any]:
    """``{name: ["Unknown field."]}`` for every key of ``data`` not among ``known``, and the
    same, nested as DRF nests errors, inside nested objects and lists of objects."""
    errors: dict[str, Any] = {}
    for name, value in data.items():
        field = known.get(name) if isinstance(name, str) else None
        if field is None:
            errors[str(name)] = [UNKNOWN_FIELD]
        elif getattr(field, "read_only", False):
            continue
        elif isinstance(field, serializers.ListSerializer) and isinstance(value, list):
            child: Any = field.child
            items = [
                unknown_fields(child.fields, item) if isinstance(item, Mapping) else {}
                for item in value
            ]
            if any(items):
                errors[name] = items
        elif isinstance(field, serializers.Serializer) and isinstance(value, Mapping):
            nested = unknown_fields(field.fields, value)
            if nested:
                errors[name] = nested
    return errors


def refuse_body(data: Any) -> None:
    """For an operation without a request body: anything but nothing or ``{}`` is a 400."""
    if data is None or data == {}:
        return
    if isinstance(data, Mapping):
        raise ValidationError(unknown_fields({}, data))
    raise ValidationError({"detail": ["This operation takes no request body."]})


# A request serializer that refuses unknown fields and values of the wrong JSON type with a
# 400. (No docstring: drf-spectacular would make it the description of every serializer
# built on this.)
class StrictTypes(serializers.Serializer[Any]):
    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            extra = unknown_fields(self.fields, data)
            extra.update(self._changed_read_only(data))
            if extra:
                raise ValidationError(extra)
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

    def _changed_read_only(self, data: Mapping[str, Any]) -> dict[str, list[str]]:
        sent = [name for name, field in self.fields.items() if field.read_only and name in data]
        if not sent:
            return {}
        instance = getattr(self, "instance", None)
        if instance is None:
            # On creation they describe what the server makes (ids, counters, times): a
            # client may post back an object it read to make a copy.
            return {}
        current = self.to_representation(instance)
        return {
            name: [READ_ONLY_FIELD]
            for name in sent
            if name not in current or _json(current[name]) != _json(data[name])
        }


def _json(value: Any) -> Any:
    """A representation as its JSON would read back (OrderedDicts, tuples, UUIDs...)."""
    return json.loads(json.dumps(value, cls=JSONEncoder))


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
