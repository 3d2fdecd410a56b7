"""The operator console's browser tests: screenshots (the documented ones copied to the
docs) and the admin's actions."""

import os
import shutil
from typing import Any

from tests.browser import DOCS_SCREENSHOTS, SCREENSHOTS

DOCUMENTED = {"dead-letter-queue", "event-timeline", "replay-preview", "resume-choice", "endpoints"}


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
    if name in DOCUMENTED and os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1":
        shutil.copyfile(SCREENSHOTS / f"{name}.png", DOCS_SCREENSHOTS / f"{name}.png")


def run_action(page: Any, action: str, row_value: str) -> None:
    page.check(f'input[name="_selected_action"][value="{row_value}"]')
    page.select_option('select[name="action"]', action)
    page.click('button[name="index"]')
