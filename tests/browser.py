"""What the browser tests share: Debian's Chromium (never a downloaded browser build), its
flags, and where screenshots land."""

from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = ROOT / "var" / "screenshots"
DOCS_SCREENSHOTS = ROOT / "docs" / "screenshots"


def require_chromium() -> Any:
    """Playwright's sync API; the calling test module is skipped without Chromium or it."""
    if not Path(CHROMIUM).exists():
        pytest.skip(
            f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True
        )
    return pytest.importorskip("playwright.sync_api")
