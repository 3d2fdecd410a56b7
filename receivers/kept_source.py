"""The source a request's body buffering looked up, kept for the receiving view.

The web process reads a request's body before Django runs (`webhooks_project/bodies.py`)
and, to know how much of it to read, first looks the source up: the very look-up the view
makes (`selectors.source_for_request`, one statement: the source and its secrets). It is
kept in the request's environ under `ENVIRON_KEY`, as (slug, `time.monotonic()`, result),
and the view takes it instead of looking again if it was made for the same slug this
recently: a body that took longer to arrive is checked again (a source disabled, or a
secret expired, meanwhile counts). A client cannot set the key: the server puts headers
under HTTP_.
"""

import time
from collections.abc import MutableMapping
from typing import Any

from django.utils import timezone

from receivers import selectors

ENVIRON_KEY = "webhooks.receiver_source"
REUSE_SECONDS = 1.0


def look_up(environ: MutableMapping[str, Any], slug: str) -> selectors.SourceForRequest | None:
    """The source for the body buffering, kept for the view."""
    found = selectors.source_for_request(slug=slug, now=timezone.now())
    environ[ENVIRON_KEY] = (slug, time.monotonic(), found)
    return found


def kept_or_looked_up(
    meta: MutableMapping[str, Any], slug: str
) -> selectors.SourceForRequest | None:
    """The view's source: the one kept a moment ago for this slug, else looked up now."""
    kept = meta.get(ENVIRON_KEY)
    if kept is not None and kept[0] == slug and time.monotonic() - kept[1] < REUSE_SECONDS:
        found: selectors.SourceForRequest | None = kept[2]
        return found
    return selectors.source_for_request(slug=slug, now=timezone.now())
