"""The snippets of docs/wire-format.md and the signed message their tests check."""

import json
import re
from collections.abc import Callable
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "wire-format.md"


SNIPPET = re.compile(r"<!-- snippet: (?P<name>[\w-]+) -->\n```\w+\n(?P<code>.*?)\n```", re.S)


# A body with non-ASCII characters, as our sender writes them (UTF-8, not escaped).
BODY = json.dumps(
    {"id": "5b0e8a52", "type": "invoice.paid", "data": {"customer": "Zoë Ça"}},
    separators=(",", ":"),
    ensure_ascii=False,
).encode("utf-8")


MSG_ID = "5b0e8a52-3c1f-4a5e-9d0e-2f7f1c9b8a11"


def snippets() -> dict[str, str]:
    return {m["name"]: m["code"] for m in SNIPPET.finditer(PAGE.read_text())}


def python_verifier(name: str) -> Callable[..., bool]:
    namespace: dict[str, object] = {}
    exec(compile(snippets()[name], f"{PAGE.name}:{name}", "exec"), namespace)  # noqa: S102
    verify = namespace["verify"]
    assert callable(verify)
    return verify
