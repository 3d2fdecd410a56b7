"""The database connection of a thread or greenlet that is about to wait."""

from django.db import DEFAULT_DB_ALIAS, connections


def connections_pooled() -> bool:
    """Whether this process's database connections come from a pool (psycopg's, as
    `DATABASE_POOL_MAX_SIZE` sets it up): taking one is then cheap for a new thread."""
    return getattr(connections[DEFAULT_DB_ALIAS], "pool", None) is not None


def give_back_pooled_connection() -> None:
    """Give a pooled connection back while we wait (the next query takes one again), so
    that the few connections of a pool serve those at work, not those waiting; an
    unpooled one is kept, as reconnecting costs more."""
    # (The connection looked up once: each use of Django's `connection` proxy looks it up
    # again, a context-local read that costs under gevent.)
    db = connections[DEFAULT_DB_ALIAS]
    if getattr(db, "pool", None) is not None and not db.in_atomic_block:
        db.close()
