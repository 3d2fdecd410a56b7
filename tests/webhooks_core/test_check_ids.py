"""Each system-check id has one meaning: defined once (webhooks_core.check_ids), reported by
one check function, and never written as a bare literal that could drift from the table."""

import ast
import re
from collections import defaultdict
from pathlib import Path

from webhooks_core.check_ids import MEANINGS

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("deliveries", "receivers", "webhooks_core", "webhooks_project")
ID = re.compile(r"^(webhooks|receivers)\.[EW]\d{3}$")


def sources() -> list[Path]:
    return [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]


def reporters() -> dict[str, set[str]]:
    """id -> the check functions (file:function) that report it through check_id()."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in sources():
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            for node in ast.walk(function):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == "check_id"
                    and isinstance(node.args[0], ast.Constant)
                ):
                    found[str(node.args[0].value)].add(f"{path.relative_to(ROOT)}:{function.name}")
    return found


def test_every_id_is_reported_by_exactly_one_check() -> None:
    found = reporters()
    assert set(found) == set(MEANINGS)
    assert {i: f for i, f in found.items() if len(f) != 1} == {}


def test_no_check_names_its_id_without_the_table() -> None:
    bare = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "id":
                value = node.value
                if isinstance(value, ast.Constant) and ID.match(str(value.value)):
                    bare.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert bare == []
