"""The generated pages in docs/ are what the code generates today.

docs/configuration.md comes from the apps' settings registries and settings.py,
docs/api/openapi.yaml from the schema view: `make docs-gen` rewrites both.
"""

import ast

import pytest

from webhooks_project import docsgen


@pytest.mark.parametrize("page", [docsgen.CONFIGURATION_PAGE, docsgen.SCHEMA_FILE], ids=str)
def test_committed_page_is_the_generated_one(page) -> None:
    generated = docsgen.outputs()[page]
    assert page.read_text() == generated, f"{page.name} is stale: run `make docs-gen`"


def test_every_setting_the_apps_read_is_documented() -> None:
    documented = {s.name for _, entries in docsgen.library_settings() for s in entries}
    read = set()
    for package in ("deliveries", "receivers"):
        for path in (docsgen.ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and node.value.startswith(("WEBHOOKS_", "RECEIVERS_"))
                    and node.value.isupper()
                ) or (
                    isinstance(node, ast.Attribute)
                    and node.attr.startswith(("WEBHOOKS_", "RECEIVERS_"))
                ):
                    read.add(node.value if isinstance(node, ast.Constant) else node.attr)
    assert read - documented == set()


def test_a_setting_added_to_settings_py_without_a_line_stops_the_generator(monkeypatch) -> None:
    source = docsgen.SETTINGS_SOURCE.read_text() + '\nNEW_THING = env.str("NEW_THING")\n'
    monkeypatch.setattr(docsgen, "_settings_source", lambda: source)
    with pytest.raises(SystemExit, match="NEW_THING"):
        docsgen.render_configuration()
