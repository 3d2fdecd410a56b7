"""Django's PostgreSQL backend, taking a pooled connection without a round trip.

`ENGINE = "webhooks_core.db.postgresql"`; everything else is Django's own backend. It
differs only where the connection comes from psycopg's pool (`OPTIONS["pool"]`) and
`CONN_HEALTH_CHECKS` is off. With the checks on, Django has the pool run an empty query
on every connection it hands out; our gevent processes take one for each round of each
endpoint's owner and give it back before they wait, so that was a round trip per round
(CPU of the process, and a wait in line behind the other greenlets).

Here a pooled connection is checked by its socket instead. A connection idle in the pool
has nothing to read: when its socket is readable, the server has closed it (a restart,
`pg_terminate_backend`, an idle timeout) or sent a notice. Only then does the empty query
run, and a connection that fails it is closed and another taken (the pool replaces a
closed one). A server gone without a word (no FIN, no RST) is found by the first query,
as the empty one would have been stuck the same way.
"""

from typing import Any

import psycopg
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool

from webhooks_core.runtime.cooperative import readable_now


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        pool = self.pool
        if pool is None or self.settings_dict["CONN_HEALTH_CHECKS"]:
            return super().get_new_connection(conn_params)
        # Every idle connection may have been closed at once (a restart): one try more
        # than the pool holds, then a new connection (the pool's, as it comes).
        for _ in range(pool.max_size + 1):
            connection = super().get_new_connection(conn_params)
            try:
                if sound(connection):
                    return connection
            except BaseException:
                # A time limit or a kill in the check's query: the pool keeps its slot.
                pool.putconn(connection)
                raise
            # Closed at the libpq level (`close()` may hand it back to the pool as it is,
            # with `close_returns`): the pool discards a closed connection and makes
            # another in its place.
            connection.pgconn.finish()
            pool.putconn(connection)
        return super().get_new_connection(conn_params)


def sound(connection: psycopg.Connection[Any]) -> bool:
    """Whether a connection just taken from the pool may be handed out."""
    if connection.closed or connection.broken:
        return False
    if not readable_now(connection.pgconn.socket):
        return True
    try:
        ConnectionPool.check_connection(connection)
    except psycopg.Error:
        return False
    return True
