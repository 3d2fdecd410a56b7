"""Endpoints as the last owner in this process read them, for the next owner's turn.

An endpoint that gets its events one at a time has a new owner's turn for each: without
this, each turn read the endpoint's version, its row, its secrets and its signing keys
again before its first claim. Here the next owner starts from what the last one read (a
copy), and its first claim checks the version as every claim does (`claims.claim_round`):
a change since (a disable, a new secret, a new URL, an open circuit) is seen there, and
the owner reads the endpoint again before anything is sent. Only versioned reads are kept
(unordered endpoints on PostgreSQL), for at most `max_age` seconds, and the endpoint's
health bookkeeping is not trusted across turns (another process may have owned it since).
"""

import copy
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from deliveries.models import Endpoint

# The most endpoints kept (the least recently read go first).
MAX_KNOWN = 1024


@dataclass(frozen=True)
class KnownEndpoint:
    endpoint: Endpoint
    version: str
    secrets: list[tuple[str, Any]]
    signing_keys: list[tuple[str, Any]] | None
    read_at: float  # time.monotonic()


_lock = threading.Lock()
_known: OrderedDict[str, KnownEndpoint] = OrderedDict()


def remember_endpoint(endpoint_id: str, known: KnownEndpoint) -> None:
    with _lock:
        _known[endpoint_id] = known
        _known.move_to_end(endpoint_id)
        while len(_known) > MAX_KNOWN:
            _known.popitem(last=False)


def recall_endpoint(endpoint_id: str, max_age: float) -> KnownEndpoint | None:
    """The endpoint as last read, if read within `max_age` seconds: a copy of its own for
    the caller, whose health bookkeeping says "unknown" (so its next recording writes it)."""
    with _lock:
        known = _known.get(endpoint_id)
    if known is None or time.monotonic() - known.read_at >= max_age:
        return None
    endpoint = copy.copy(known.endpoint)
    endpoint.last_success_at = None
    return KnownEndpoint(endpoint, known.version, known.secrets, known.signing_keys, known.read_at)


def forget_endpoint(endpoint_id: str) -> None:
    with _lock:
        _known.pop(endpoint_id, None)
