"""Tools for idempotent handlers: per-entity locks, versioned updates, missing predecessors.

* ``entity_lock("payment", "pay_1")`` takes a PostgreSQL advisory *transaction* lock on a
  64-bit key derived from the name, so events about one object are processed one at a time
  while other objects proceed in parallel. It is released at commit or rollback; it must be
  called inside ``transaction.atomic()``. On SQLite (the embedded single-process default)
  it does nothing: SQLite serialises writers anyway.
* ``versioned_update(queryset, version=11, status=...)`` applies the change only if the
  stored version is older than the incoming one: a version 10 that arrives after 11 changes
  nothing. Returns whether the row changed.
* ``MissingPredecessor``: raise it from a handler when the event refers to an object that
  does not exist yet (``payment.succeeded`` before ``payment.created``). The event is retried
  with backoff like any failure, with a clear reason; after the last attempt it is failed
  and an operator (or reconciliation) takes over. A handler that can fetch the object from
  the provider's API should do that instead of raising.

A lock orders concurrent processing; a version or state check orders time. Use both.
"""

import hashlib
from typing import Any

from django.db import connection, models, transaction


class MissingPredecessor(Exception):
    """The event depends on an object we have not seen yet; retry later."""


def lock_key(kind: str, key: str) -> int:
    """A stable signed 64-bit integer for ``(kind, key)``, as ``pg_advisory_xact_lock`` takes."""
    digest = hashlib.blake2b(f"{kind}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def entity_lock(kind: str, key: str) -> None:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("entity_lock() must be called inside transaction.atomic()")
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [lock_key(kind, key)])


def versioned_update(
    queryset: "models.QuerySet[Any]",
    *,
    version: int,
    version_field: str = "version",
    **fields: Any,
) -> bool:
    """UPDATE ... SET fields, version = incoming WHERE version < incoming."""
    changed = queryset.filter(**{f"{version_field}__lt": version}).update(
        **{version_field: version}, **fields
    )
    return changed > 0
