"""The database connection of a thread or greenlet that is about to wait."""

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper


def connections_pooled() -> bool:
    """Whether this process's database connections come from a pool (psycopg's, as
    `DATABASE_POOL_MAX_SIZE` sets it up): taking one is then cheap for a new thread."""
    return _pooled(connections[DEFAULT_DB_ALIAS])


def _pooled(db: BaseDatabaseWrapper) -> bool:
    return getattr(db, "pool", None) is not None


def give_back_pooled_connection() -> None:
    """Give a pooled connection back while we wait (the next query takes one again), so
    that the few connections of a pool serve those at work, not those waiting; an
    unpooled one is kept, as reconnecting costs more."""
    # (The connection looked up once: each use of Django's `connection` proxy looks it up
    # again, a context-local read that costs under gevent.)
    db = connections[DEFAULT_DB_ALIAS]
    if _pooled(db) and not db.in_atomic_block:
        db.close()
