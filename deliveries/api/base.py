"""Moved to ``webhooks_core.api.base``; this import path stays for existing code
(it is the same module)."""

import sys

from webhooks_core.api.base import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = sys.modules["webhooks_core.api.base"]
