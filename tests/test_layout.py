"""The test tree's rules: what tests share lives in shared modules, not in test modules.

A test module imports no other test module (a helper two modules use moves to a helper
module or to tests/fixtures.py), and no module defines a fixture or factory of the same name
as one of tests/fixtures.py (one definition, used by every test)."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures.py"


def is_fixture(node: ast.FunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if ast.unparse(target) in ("pytest.fixture", "fixture"):
            return True
    return False


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(TESTS.parent).with_suffix("").parts)


def imported_modules(path: Path, tree: ast.Module) -> list[str]:
    """Every module `path` imports, relative imports resolved."""
    package = module_of(path).rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0]
                base = f"{parent}.{base}" if base else parent
                # `from . import test_x` names a module too
                found += [f"{base}.{alias.name}" for alias in node.names]
            found.append(base)
    return found


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "examples" not in p.relative_to(TESTS).parts)


def is_test_module(name: str) -> bool:
    return name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")


def test_no_module_imports_a_test_module() -> None:
    offenders = []
    for path in python_files():
        tree = ast.parse(path.read_text(), str(path))
        offenders += [
            f"{path.relative_to(TESTS.parent)} imports {name}"
            for name in imported_modules(path, tree)
            if is_test_module(name)
        ]
    assert offenders == [], "move what they share to a helper module or tests/fixtures.py"


def shared_names() -> set[str]:
    """The fixtures of tests/fixtures.py and its factories (its public functions)."""
    tree = ast.parse(FIXTURES.read_text())
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")
    }


def test_fixtures_module_holds_the_shared_fixtures() -> None:
    assert {
        "api",
        "api_client",
        "free_port",
        "make_endpoint",
        "make_source",
        "receiver",
        "staff",
    } <= shared_names()


def test_no_module_defines_a_fixture_or_factory_of_the_fixtures_module_again() -> None:
    shared = shared_names()
    offenders = []
    for path in python_files():
        if path == FIXTURES:
            continue
        tree = ast.parse(path.read_text(), str(path))
        offenders += [
            f"{path.relative_to(TESTS.parent)}:{node.lineno} defines {node.name}"
            + (" (fixture)" if is_fixture(node) else "")
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name in shared
        ]
    assert offenders == [], "use the one of tests/fixtures.py"
