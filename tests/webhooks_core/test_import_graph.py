"""The library's import graph: no cycle among the modules of ``deliveries``,
``receivers`` and ``webhooks_core``, counting function-local imports (those under ``if
TYPE_CHECKING:`` aside); ``webhooks_core`` imports neither app; ``receivers`` imports nothing
of ``deliveries``; and no module reaches its own package's names through the package's
re-exporting ``__init__``.

Read from the source with ``ast``, so a lazy import inside a function counts as what it
is: a dependency that merely waits.
"""

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("deliveries", "receivers", "webhooks_core")
#: The imports across the apps, each behind ``apps.is_installed("receivers")``: where both
#: are installed, the sending side's URLconf serves the receiving routes too, and the
#: operations dashboard (one page for both sides) shows the inbox.
ACROSS = {
    ("deliveries.api.urls", "receivers.api"),
    ("deliveries.api.urls", "receivers.api.urls"),
    ("deliveries.selectors.dashboard", "receivers.models"),
}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[dotted.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path) -> Iterator[tuple[str, list[str]]]:
    """(the module imported from, the names taken) for every import outside TYPE_CHECKING."""
    tree = ast.parse(path.read_text())
    skipped = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            yield base, [alias.name for alias in node.names]


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {module: set() for module in MODULES}
    for module, path in MODULES.items():
        for base, names in _imports(module, path):
            for target in [base, *(f"{base}.{name}" for name in names)]:
                resolved = _resolve(target)
                if resolved and resolved != module:
                    edges[module].add(resolved)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative: the graph is deep enough to matter for the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


EDGES = _edges()


def _top(module: str) -> str:
    return module.split(".")[0]


def test_the_walker_finds_a_cycle_and_an_upward_import() -> None:
    # The checks below would pass on a graph they cannot read; this one they must fail.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert "webhooks_core.conf" in EDGES["deliveries.conf"]
    assert "receivers.tasks" in EDGES["receivers.apps"]  # a function-local import counts


def test_no_import_cycle() -> None:
    assert cycles(EDGES) == []


def test_webhooks_core_imports_no_app() -> None:
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in EDGES.items()
        for target in targets
        if _top(module) == "webhooks_core" and _top(target) != "webhooks_core"
    )
    assert upward == []


@pytest.mark.parametrize(
    ("side", "other"), [("receivers", "deliveries"), ("deliveries", "receivers")]
)
def test_one_side_imports_nothing_of_the_other(side: str, other: str) -> None:
    across = sorted(
        f"{module} -> {target}"
        for module, targets in EDGES.items()
        for target in targets
        if _top(module) == side and _top(target) == other and (module, target) not in ACROSS
    )
    assert across == []


def test_no_module_takes_its_own_package_names_from_the_package_init() -> None:
    # ``from . import x`` is fine when x is a module of the package; a name the package's
    # __init__ re-exports means importing the whole package from inside it.
    found = []
    for module, path in MODULES.items():
        if path.name == "__init__.py":
            continue
        own = module.rpartition(".")[0]
        for base, names in _imports(module, path):
            if base != own:
                continue
            through_init = [name for name in names if f"{own}.{name}" not in MODULES]
            if through_init:
                found.append(f"{module}: from {own} import {', '.join(through_init)}")
    assert found == []
