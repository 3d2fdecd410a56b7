"""The consumer API's query parameters and their bounds. Pure: no Django, no I/O.

Unknown parameters are refused (a typo must not pass for a setting), as the rest of the
API refuses unknown fields.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

LIMIT_DEFAULT, LIMIT_MIN, LIMIT_MAX = 50, 1, 250
WAIT_DEFAULT, WAIT_MIN, WAIT_MAX = 0.0, 0.0, 30.0
LEASE_DEFAULT, LEASE_MIN, LEASE_MAX = 30.0, 1.0, 300.0
NAME_MAX_LENGTH = 100
NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


class InvalidParams(ValueError):
    """``errors``: {parameter: [messages]}, safe to show."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))


@dataclass(frozen=True)
class ReadParams:
    iterator: str | None = None
    after: datetime | None = None
    limit: int = LIMIT_DEFAULT
    wait: float = WAIT_DEFAULT
    lease: float = LEASE_DEFAULT


def read_params(query: Mapping[str, str], *, group: bool) -> ReadParams:
    """A feed read's (``group`` False: iterator, after, limit, wait) or a consumer
    group's (limit, lease, wait) parameters, checked; `InvalidParams` otherwise."""
    allowed = {"limit", "wait", "lease"} if group else {"iterator", "after", "limit", "wait"}
    errors: dict[str, list[str]] = {}
    for name in sorted(set(query) - allowed):
        errors[name] = [f"Unknown parameter; this one takes {', '.join(sorted(allowed))}."]
    limit = _number(query, "limit", LIMIT_DEFAULT, LIMIT_MIN, LIMIT_MAX, errors, integer=True)
    wait = _number(query, "wait", WAIT_DEFAULT, WAIT_MIN, WAIT_MAX, errors)
    lease = _number(query, "lease", LEASE_DEFAULT, LEASE_MIN, LEASE_MAX, errors)
    iterator = query.get("iterator") or None
    after = None
    if query.get("after"):
        try:
            after = parse_time(query["after"])
        except ValueError as exc:
            errors["after"] = [str(exc)]
    if iterator is not None and after is not None:
        errors["after"] = ["Give an iterator or a time to start after, not both."]
    if errors:
        raise InvalidParams(errors)
    return ReadParams(iterator=iterator, after=after, limit=int(limit), wait=wait, lease=lease)


def _number(
    query: Mapping[str, str],
    name: str,
    default: float,
    low: float,
    high: float,
    errors: dict[str, list[str]],
    *,
    integer: bool = False,
) -> float:
    text = query.get(name)
    if text is None or text == "":
        return default
    try:
        number = int(text) if integer else float(text)
    except ValueError:
        number = None
    if number is None or number != number or not low <= number <= high:  # NaN too
        kind = "an integer" if integer else "a number"
        errors[name] = [f"Must be {kind} from {low:g} to {high:g}."]
        return default
    return number


def parse_time(text: str) -> datetime:
    """An RFC 3339 time with its offset (``Z`` or ``±hh:mm``); ValueError otherwise."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError("Must be an RFC 3339 time, e.g. 2026-04-15T10:12:34Z.") from None
    if moment.tzinfo is None:
        raise ValueError("Must be an RFC 3339 time with its offset (Z or +hh:mm).")
    return moment


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a consumer group, or None."""
    if not name or len(name) > NAME_MAX_LENGTH or not set(name) <= NAME_CHARACTERS:
        return f"A consumer name is 1-{NAME_MAX_LENGTH} characters of [A-Za-z0-9_.-]."
    return None
