"""Whether JSON text can be stored: the one check behind the API, ``emit`` and the inbox.

Pure module. PostgreSQL's ``jsonb`` refuses U+0000, and a lone surrogate (``"\\ud800"`` is
valid JSON) can be neither stored in ``jsonb`` nor encoded as UTF-8 for a request body.
Keys are strings too and are checked the same way.
"""

from typing import Any


def unstorable_text(value: Any) -> str | None:
    """Why some string in ``value`` (any depth, keys included) cannot be stored, or None.

    Iterative, so a deep document costs no recursion (depth has its own limit:
    ``webhooks_core.jsonchecks.depth``)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "contains U+0000 (NUL)"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "contains an unpaired surrogate code point"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return None
