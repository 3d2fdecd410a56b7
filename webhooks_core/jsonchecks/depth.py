"""How deeply a parsed JSON document nests, measured without recursion. Pure.

Python's ``json`` parses up to about 1,000 levels and raises ``RecursionError`` beyond; a
document just under that parses, then fails later wherever it is walked again with less
stack to spare (encoding it for PostgreSQL, validating it, rendering it in a worker). Real
events nest a handful of levels, so anything deeper than ``MAX_DEPTH`` is refused where it
arrives, with a 400, instead of failing later as a 500 or a stuck row.
"""

from typing import Any

MAX_DEPTH = 256


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` has arrays or objects nested more than ``limit`` levels deep."""
    if not isinstance(value, dict | list):
        return False
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
