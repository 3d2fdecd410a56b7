"""The README stays short and every topic is one link away from it."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)(#[^)]*)?\)")


def test_every_relative_link_of_the_readme_exists() -> None:
    targets = [m.group(1) for m in LINK.finditer(README)]
    assert targets
    assert [t for t in targets if not (ROOT / t).exists()] == []


def test_the_readme_links_the_documentation_home() -> None:
    # Every page of the site has the whole menu, so the home is enough for two clicks.
    assert "docs/index.md" in {m.group(1) for m in LINK.finditer(README)}


def test_the_integration_section_comes_before_the_real_stack() -> None:
    headings = re.findall(r"^## (.+)$", README, flags=re.M)
    assert headings.index("Add to an existing Django project") < headings.index("Production")


def nav_pages(entries: object) -> list[str]:
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in nav_pages(value)]
    return []


def test_the_readme_links_every_page_of_the_site() -> None:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    linked = {m.group(1) for m in LINK.finditer(README)}
    pages = {f"docs/{page}" for page in nav_pages(nav)}
    assert pages - linked == set()
    # ...and the menu holds every page (mkdocs build --strict refuses one it omits).
    assert {str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")} == pages


def test_the_readme_names_what_make_test_needs_and_how_long_it_takes() -> None:
    from tests.services import SERVICES

    section = README.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    for needed in ("PostgreSQL", "Redis", "RabbitMQ", "NATS", "redis-server", "pg_config"):
        assert needed in section, needed
    assert {"rabbitmq", "nats"} == set(SERVICES)
    assert re.search(r"about\s+\d+.\d+\s+minutes", section)
