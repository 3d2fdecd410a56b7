"""Deleting an endpoint while it works: its rows first, then itself, tried again when a
concurrent write gets in the way."""

from uuid import UUID

from django.db import IntegrityError, transaction

from deliveries.models import Attempt, Delivery, Endpoint
from webhooks_core.db.sql import aborted_by_a_concurrent_write, tried_again

# A deletion that meets a concurrent write (a deadlock with an owner's recording, a
# delivery or attempt committed after the rows to delete were collected) is tried again
# this many times in all.
DELETE_TRIES = 5


def endpoint_delete(*, endpoint_id: UUID) -> None:
    """Delete an endpoint with its secrets, deliveries and their attempts.

    Its deliveries and their attempts go first, each in one statement (not collected
    row by row, which left a long window for deliveries added meanwhile), the endpoint's
    own row last, in the order an owner's recording locks them (its rows, then the
    endpoint's health). A delivery or attempt another transaction commits in between
    fails our commit (a foreign key to a deleted row), and a deadlock on the rows aborts
    one of the two: the deletion is then tried again, so it never answers an error for
    work that was merely going on."""

    def delete() -> None:
        with transaction.atomic():
            _delete_deliveries_of(endpoint_id)
            Endpoint.objects.filter(pk=endpoint_id).delete()

    tried_again(
        delete,
        tries=DELETE_TRIES,
        when=lambda exc: isinstance(exc, IntegrityError) or aborted_by_a_concurrent_write(exc),
        what=f"deleting endpoint {endpoint_id}",
    )


def _delete_deliveries_of(endpoint_id: UUID) -> None:
    attempts, deliveries = Attempt._meta.db_table, Delivery._meta.db_table
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {attempts} WHERE delivery_id IN "  # noqa: S608 (our tables)
            f"(SELECT id FROM {deliveries} WHERE endpoint_id = %s)",
            [str(endpoint_id)],
        )
        cursor.execute(f"DELETE FROM {deliveries} WHERE endpoint_id = %s", [str(endpoint_id)])  # noqa: S608
