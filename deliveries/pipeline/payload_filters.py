"""Payload filters: an endpoint receives only the events its filter matches. Pure: no Django.

A filter is a JSON object over the event as sent in the default envelope
(``{"id", "type", "version", "occurred_at", "data"}``), in a small MongoDB-like language::

    {"data.amount": {"$gte": 100}, "data.currency": {"$in": ["EUR", "USD"]},
     "$or": [{"data.customer.vip": true}, {"data.country": "FR"}]}

* keys are dotted paths into the event (a numeric segment indexes a list); several keys
  combine with AND; ``$or`` and ``$and`` take a non-empty list of filters;
* a condition is an object of operators (``$eq $ne $in $nin $gt $gte $lt $lte $exists
  $regex``), or any other value, which means ``$eq``;
* equality is JSON equality: ``1`` equals ``1.0`` but not ``true``; objects and lists
  compare whole. ``$gt`` and friends compare numbers with numbers and strings with strings
  (ISO 8601 times in UTC compare correctly as strings); anything else does not match;
* a missing path matches only ``$ne``, ``$nin`` and ``$exists: false``;
* ``$regex`` is an RE2 pattern (``google-re2``: linear time, so no pattern can stall a
  fan-out; no back-references or look-around), searched in string values only; ``(?i)``
  makes it case-insensitive.

`compile_filter` validates once and returns a fast predicate; `FilterError` names the
path of the first problem (``filter.data.amount.$gte: must be a number or a string``).
Every dimension is bounded (size, nesting, conditions, list and pattern lengths), so a
filter's cost per event is small and known when it is saved.
"""

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import re2

MAX_FILTER_BYTES = 8192
MAX_DEPTH = 6  # nested $and/$or levels, and object depth inside a compared value
MAX_CONDITIONS = 64
MAX_LIST_ITEMS = 256
MAX_PATH_LENGTH = 256
MAX_PATH_SEGMENTS = 16
MAX_REGEX_LENGTH = 256
# RE2 compiles within this much memory or refuses the pattern (its default is 8 MiB).
REGEX_MAX_MEMORY = 1 << 20

Predicate = Callable[[Mapping[str, Any]], bool]

_MISSING: Any = object()
_COMPARISONS = ("$gt", "$gte", "$lt", "$lte")
OPERATORS = frozenset(("$eq", "$ne", "$in", "$nin", "$exists", "$regex", *_COMPARISONS))
COMBINATORS = frozenset(("$and", "$or"))


class FilterError(ValueError):
    """A filter that cannot be saved; ``path`` names where, ``message`` says why."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def validate(document: Any) -> None:
    """Raise `FilterError` when ``document`` is not a valid filter (None means no filter)."""
    compile_filter(document)


def compile_filter(document: Any) -> Predicate:
    """A predicate over an event dict. ``None`` (no filter) matches every event."""
    if document is None:
        return _always
    if not isinstance(document, dict):
        raise FilterError("filter", "must be a JSON object")
    try:
        size = len(json.dumps(document, allow_nan=False, separators=(",", ":")))
    except (TypeError, ValueError):
        raise FilterError("filter", "must be plain JSON") from None
    except RecursionError:
        raise FilterError("filter", f"nests deeper than {MAX_DEPTH} levels") from None
    if size > MAX_FILTER_BYTES:
        raise FilterError("filter", f"is longer than {MAX_FILTER_BYTES} bytes as JSON")
    compiler = _Compiler()
    return compiler.filter(document, "filter", depth=0)


CACHE_SIZE = 1024
_compiled: dict[str, Predicate] = {}


def cached_predicate(document: Any) -> Predicate:
    """`compile_filter`, memoised: fan-out compiles each distinct filter once per process,
    not once per event. The key is the document's ``repr``: cheap (no JSON encoding on the
    hot path) and exact (``True`` and ``1`` read differently, unlike ``==``); PostgreSQL
    returns a jsonb object's keys in one canonical order, so a filter keeps its key."""
    if not document:
        return _always
    key = repr(document)
    predicate = _compiled.get(key)
    if predicate is None:
        predicate = compile_filter(document)
        if len(_compiled) >= CACHE_SIZE:
            _compiled.clear()  # rare: more distinct filters than the bound; start over
        _compiled[key] = predicate
    return predicate


def _always(event: Mapping[str, Any]) -> bool:
    return True


class _Compiler:
    def __init__(self) -> None:
        self.conditions = 0

    def _count(self, path: str) -> None:
        self.conditions += 1
        if self.conditions > MAX_CONDITIONS:
            raise FilterError(path, f"a filter holds at most {MAX_CONDITIONS} conditions")

    def filter(self, document: Any, path: str, *, depth: int) -> Predicate:
        if not isinstance(document, dict):
            raise FilterError(path, "must be a JSON object")
        if depth > MAX_DEPTH:
            raise FilterError(path, f"nests deeper than {MAX_DEPTH} levels")
        parts: list[Predicate] = []
        for key, condition in document.items():
            if not isinstance(key, str):
                raise FilterError(path, "keys must be strings")
            where = f"{path}.{key}"
            if key in COMBINATORS:
                parts.append(self.combination(key, condition, where, depth=depth))
            elif key.startswith("$"):
                raise FilterError(where, "unknown operator (a filter's keys are paths, $and, $or)")
            else:
                parts.append(self.field(key, condition, where))
        return _all_of(parts)

    def combination(self, key: str, items: Any, path: str, *, depth: int) -> Predicate:
        if not isinstance(items, list) or not items:
            raise FilterError(path, "must be a non-empty list of filters")
        if len(items) > MAX_LIST_ITEMS:
            raise FilterError(path, f"holds at most {MAX_LIST_ITEMS} filters")
        compiled = [
            self.filter(item, f"{path}[{index}]", depth=depth + 1)
            for index, item in enumerate(items)
        ]
        if key == "$and":
            return _all_of(compiled)
        return _any_of(compiled)

    def field(self, key: str, condition: Any, path: str) -> Predicate:
        segments = _segments(key, path)
        if isinstance(condition, dict) and any(
            isinstance(k, str) and k.startswith("$") for k in condition
        ):
            tests = [
                self.operator(op, operand, f"{path}.{op}") for op, operand in condition.items()
            ]
        else:
            tests = [self.operator("$eq", condition, path)]
        getter = _getter(segments)
        if len(tests) == 1:
            test = tests[0]
            return lambda event: test(getter(event))

        def check(event: Mapping[str, Any]) -> bool:
            value = getter(event)
            return all(test(value) for test in tests)

        return check

    def operator(self, op: Any, operand: Any, path: str) -> Callable[[Any], bool]:
        self._count(path)
        if op not in OPERATORS:
            if str(op).startswith("$"):
                raise FilterError(path, "unknown operator")
            raise FilterError(path, "cannot mix operators and fields in one condition")
        if op in ("$eq", "$ne"):
            _check_value(operand, path)
            equal = _equality(operand)
            if op == "$eq":
                return equal
            return lambda value: not equal(value)
        if op in ("$in", "$nin"):
            if not isinstance(operand, list):
                raise FilterError(path, "must be a list")
            if len(operand) > MAX_LIST_ITEMS:
                raise FilterError(path, f"holds at most {MAX_LIST_ITEMS} values")
            for index, item in enumerate(operand):
                _check_value(item, f"{path}[{index}]")
            member = _membership(operand)
            if op == "$in":
                return member
            return lambda value: not member(value)
        if op in _COMPARISONS:
            if not (_is_number(operand) or isinstance(operand, str)):
                raise FilterError(path, "must be a number or a string")
            return _comparison(op, operand)
        if op == "$exists":
            if not isinstance(operand, bool):
                raise FilterError(path, "must be true or false")
            if operand:
                return lambda value: value is not _MISSING
            return lambda value: value is _MISSING
        # $regex
        if not isinstance(operand, str):
            raise FilterError(path, "must be a string")
        if len(operand) > MAX_REGEX_LENGTH:
            raise FilterError(path, f"is longer than {MAX_REGEX_LENGTH} characters")
        search = _regex(operand, path)
        return lambda value: isinstance(value, str) and search(value)


def _segments(key: str, path: str) -> tuple[str | int, ...]:
    if not key:
        raise FilterError(path, "a path must not be empty")
    if len(key) > MAX_PATH_LENGTH:
        raise FilterError(path, f"a path is at most {MAX_PATH_LENGTH} characters")
    parts = key.split(".")
    if len(parts) > MAX_PATH_SEGMENTS:
        raise FilterError(path, f"a path has at most {MAX_PATH_SEGMENTS} segments")
    if any(not part for part in parts):
        raise FilterError(path, "a path has no empty segments (check the dots)")
    return tuple(int(p) if p.isascii() and p.isdigit() else p for p in parts)


def _getter(segments: tuple[str | int, ...]) -> Callable[[Mapping[str, Any]], Any]:
    def get(event: Mapping[str, Any]) -> Any:
        value: Any = event
        for segment in segments:
            if isinstance(value, dict):
                # A numeric segment is also a key: {"2024": ...} is reachable as "x.2024".
                value = value.get(str(segment) if isinstance(segment, int) else segment, _MISSING)
            elif isinstance(value, list) and isinstance(segment, int):
                value = value[segment] if segment < len(value) else _MISSING
            else:
                return _MISSING
            if value is _MISSING:
                return _MISSING
        return value

    if len(segments) == 2 and all(isinstance(s, str) for s in segments):
        # The common case ("data.amount") without the loop.
        first, second = str(segments[0]), str(segments[1])

        def get_two(event: Mapping[str, Any]) -> Any:
            inner = event.get(first, _MISSING)
            return inner.get(second, _MISSING) if isinstance(inner, dict) else _MISSING

        return get_two
    return get


def _check_value(value: Any, path: str, depth: int = 0) -> None:
    """An operand is plain JSON, nested at most MAX_DEPTH deep."""
    if depth > MAX_DEPTH:
        raise FilterError(path, f"a value nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_value(item, f"{path}.{key}", depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_value(item, f"{path}[{index}]", depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise FilterError(path, "must be a finite number")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: Python's `==` says True == 1, JSON does not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, dict):
        return (
            isinstance(b, dict) and a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
        )
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_json_equal, a, b))
    return type(a) is type(b) and bool(a == b)


def _scalar_key(value: Any) -> tuple[str, Any] | None:
    """A hashable key equal for JSON-equal scalars; None for objects and lists."""
    if value is None or isinstance(value, bool):
        return ("literal", value)
    if _is_number(value):
        return ("number", value)  # hash(1) == hash(1.0), as JSON wants
    if isinstance(value, str):
        return ("string", value)
    return None


def _equality(operand: Any) -> Callable[[Any], bool]:
    key = _scalar_key(operand)
    if key is None:
        return lambda value: value is not _MISSING and _json_equal(operand, value)
    return lambda value: value is not _MISSING and _scalar_key(value) == key


def _membership(operands: list[Any]) -> Callable[[Any], bool]:
    keys = {_scalar_key(item) for item in operands} - {None}
    compound = [item for item in operands if _scalar_key(item) is None]

    def member(value: Any) -> bool:
        if value is _MISSING:
            return False
        key = _scalar_key(value)
        if key is not None:
            return key in keys
        return any(_json_equal(item, value) for item in compound)

    return member


def _comparison(op: str, operand: Any) -> Callable[[Any], bool]:
    numeric = _is_number(operand)

    def comparable(value: Any) -> bool:
        return _is_number(value) if numeric else isinstance(value, str)

    if op == "$gt":
        return lambda value: comparable(value) and value > operand
    if op == "$gte":
        return lambda value: comparable(value) and value >= operand
    if op == "$lt":
        return lambda value: comparable(value) and value < operand
    return lambda value: comparable(value) and value <= operand


def _regex(pattern: str, path: str) -> Callable[[str], bool]:
    options = re2.Options()
    options.log_errors = False  # the error goes to the caller, not to stderr
    options.max_mem = REGEX_MAX_MEMORY
    try:
        compiled = re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else ""
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise FilterError(path, f"not a valid RE2 pattern ({detail})") from None
    return lambda value: compiled.search(value) is not None


def _all_of(parts: list[Predicate]) -> Predicate:
    if not parts:
        return _always
    if len(parts) == 1:
        return parts[0]
    return lambda event: all(part(event) for part in parts)


def _any_of(parts: list[Predicate]) -> Predicate:
    if len(parts) == 1:
        return parts[0]
    return lambda event: any(part(event) for part in parts)
