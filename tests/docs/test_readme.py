"""The README stays short and every topic is one link away from it."""

import re
from pathlib import Path

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
    assert headings.index("Add to an existing Django project") < headings.index("The real stack")
