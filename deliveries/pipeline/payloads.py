"""Where an event's data lives: inline in the row, or offloaded to Django's storage.

Data whose compact JSON is larger than ``WEBHOOKS_PAYLOAD_OFFLOAD_BYTES`` is written
through the storage named by ``WEBHOOKS_PAYLOAD_STORAGE`` (a key of ``STORAGES``: the file
system by default, any django-storages backend in production); the row keeps only the
file's name and its SHA-256, so big payloads do not bloat the tables the sending path
scans. Every reader goes through ``load``: it verifies the hash, so a file that was
changed or lost fails loudly (``PayloadUnavailable``) instead of sending wrong bytes.
"""

import hashlib
import json
from typing import TYPE_CHECKING, Any

from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages

from deliveries import conf

if TYPE_CHECKING:
    from deliveries.models import Event

PREFIX = "webhook-payloads"


class PayloadUnavailable(Exception):
    """The offloaded data of an event cannot be read back as it was written."""


def _storage() -> Storage:
    return storages[conf.get().payload_storage]


def _threshold() -> int:
    return conf.get().payload_offload_bytes


def encode(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def offload_if_large(event: "Event") -> None:
    """Move ``event.data`` to storage when it is over the threshold (before the INSERT).

    The file is written before the row: if the caller's transaction then rolls back, the
    file stays behind unreferenced, which is harmless (no row points at it).
    """
    threshold = _threshold()
    if threshold <= 0 or event.data_ref:
        return
    blob = encode(event.data)
    if len(blob) <= threshold:
        return
    event.data_ref = _storage().save(f"{PREFIX}/{event.id}.json", ContentFile(blob))
    event.data_sha256 = hashlib.sha256(blob).hexdigest()
    event.data = None


def load(event: "Event") -> Any:
    """The event's data, from the row or from storage (hash verified)."""
    if not event.data_ref:
        return event.data
    try:
        with _storage().open(event.data_ref, "rb") as stored:
            blob = stored.read()
    except (OSError, ValueError) as exc:
        # The message names the file, never its content.
        raise PayloadUnavailable(
            f"stored payload {event.data_ref!r} cannot be read ({type(exc).__name__})"
        ) from None
    if hashlib.sha256(blob).hexdigest() != event.data_sha256:
        raise PayloadUnavailable(f"stored payload {event.data_ref!r} does not match its sha256")
    return json.loads(blob)


def discard(names: list[str]) -> None:
    """Delete stored payloads (their events are gone); a missing file is fine."""
    storage = _storage()
    for name in names:
        if name:
            storage.delete(name)
