"""The database connection of a thread or greenlet that is about to wait."""

from django.db import connection


def connections_pooled() -> bool:
    """Whether this process's database connections come from a pool (psycopg's, as
    `DATABASE_POOL_MAX_SIZE` sets it up): taking one is then cheap for a new thread."""
    return getattr(connection, "pool", None) is not None


def give_back_pooled_connection() -> None:
    """Give a pooled connection back while we wait (the next query takes one again), so
    that the few connections of a pool serve those at work, not those waiting; an
    unpooled one is kept, as reconnecting costs more."""
    if connections_pooled() and not connection.in_atomic_block:
        connection.close()
