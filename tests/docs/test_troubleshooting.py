"""The troubleshooting page explains every system-check id, with the meaning the code gives it."""

import re
from pathlib import Path

from webhooks_core.check_ids import MEANINGS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"


def test_every_check_id_has_one_row() -> None:
    rows = re.findall(r"^\| `((?:webhooks|receivers)\.[EW]\d{3})` \|", PAGE.read_text(), re.M)
    assert sorted(rows) == sorted(MEANINGS)
