"""Reading an endpoint's feed: its deliveries in position order, rendered as a push
would send them.

The position (see ``positions``) never skips a row. On PostgreSQL each delivery carries
``feed_xid``, the id of the transaction that inserted it (the column's default,
``pg_current_xact_id()``), and a read returns only rows whose ``feed_xid`` is below
``pg_snapshot_xmin(pg_current_snapshot())``: every transaction below that bound has
ended (committed or rolled back), and every transaction that gets an id later gets a
larger one. So once a read has returned rows up to a position, no row can later commit
at or below it: a transaction still running has an id at or above the bound, above
every position handed out. Rows of a transaction that committed early but whose id is
above an older, still-running one wait until that one ends (a read sees them then, in
order). On SQLite writes are serialized, so the id alone is the position.
"""

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection
from django.utils import timezone

from deliveries.models import Delivery, Endpoint
from deliveries.pipeline.rendering import utc_text
from deliveries.pipeline.wire import message_headers, render_body, signing_keys
from deliveries.polling.positions import Position

TABLE = Delivery._meta.db_table
#: The feed's horizon: rows whose transaction id is below it can be read (see above).
HORIZON = "pg_snapshot_xmin(pg_current_snapshot())"


@dataclass(frozen=True)
class FeedRow:
    delivery_id: int
    position: Position
    created_at: datetime


def _postgres() -> bool:
    return connection.vendor == "postgresql"


def rows_after(
    endpoint_id: UUID, after: Position, limit: int, *, until: Position | None = None
) -> list[FeedRow]:
    """Up to ``limit`` rows after ``after`` (and up to ``until``, when given) that no
    later commit can precede, oldest position first."""
    if _postgres():
        sql = (
            f"SELECT id, feed_xid::text, created_at FROM {TABLE} "  # noqa: S608 (our table)
            "WHERE endpoint_id = %s AND feed_xid >= %s::text::xid8 "
            "AND (feed_xid > %s::text::xid8 OR id > %s) "
            f"AND feed_xid < {HORIZON} "
        )
        params: list[Any] = [endpoint_id, str(after.xid), str(after.xid), after.id]
        if until is not None:
            sql += "AND feed_xid <= %s::text::xid8 AND (feed_xid < %s::text::xid8 OR id <= %s) "
            params += [str(until.xid), str(until.xid), until.id]
        sql += "ORDER BY feed_xid, id LIMIT %s"
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, limit])
            return [FeedRow(pk, Position(int(xid), pk), at) for pk, xid, at in cursor.fetchall()]
    rows = Delivery.objects.filter(endpoint_id=endpoint_id, pk__gt=after.id)
    if until is not None:
        rows = rows.filter(pk__lte=until.id)
    return [
        FeedRow(pk, Position(0, pk), at)
        for pk, at in rows.order_by("pk").values_list("pk", "created_at")[:limit]
    ]


def rows_hidden(endpoint_id: UUID) -> bool:
    """Whether rows of the endpoint have committed that no read returns yet (an older
    transaction still runs). Never on SQLite: a committed row is readable at once."""
    if not _postgres():
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {TABLE} WHERE endpoint_id = %s "  # noqa: S608
            f"AND feed_xid >= {HORIZON})",
            [endpoint_id],
        )
        return bool(cursor.fetchone()[0])


def count_after(endpoint_id: UUID, after: Position) -> int:
    """How many rows wait after ``after`` (visible or not yet): a consumer's lag."""
    if _postgres():
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT count(*) FROM {TABLE} WHERE endpoint_id = %s "  # noqa: S608
                "AND feed_xid >= %s::text::xid8 AND (feed_xid > %s::text::xid8 OR id > %s)",
                [endpoint_id, str(after.xid), str(after.xid), after.id],
            )
            return int(cursor.fetchone()[0])
    return Delivery.objects.filter(endpoint_id=endpoint_id, pk__gt=after.id).count()


def position_before(endpoint_id: UUID, moment: datetime) -> Position:
    """The position just before the first row created after ``moment`` (a seek by time,
    or ``?after=``); the end of what is visible now when there is none."""
    if _postgres():
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT feed_xid::text, id FROM {TABLE} WHERE endpoint_id = %s "  # noqa: S608
                "AND created_at > %s ORDER BY feed_xid, id LIMIT 1",
                [endpoint_id, moment],
            )
            first = cursor.fetchone()
            if first is not None:
                return Position(int(first[0]), int(first[1]) - 1)
            cursor.execute(
                f"SELECT feed_xid::text, id FROM {TABLE} WHERE endpoint_id = %s "  # noqa: S608
                f"AND feed_xid < {HORIZON} "
                "ORDER BY feed_xid DESC, id DESC LIMIT 1",
                [endpoint_id],
            )
            last = cursor.fetchone()
            return Position(int(last[0]), int(last[1])) if last else Position(0, 0)
    rows = Delivery.objects.filter(endpoint_id=endpoint_id)
    first_id = rows.filter(created_at__gt=moment).order_by("pk").values_list("pk", flat=True)
    found = first_id.first()
    if found is not None:
        return Position(0, found - 1)
    last_id = rows.order_by("-pk").values_list("pk", flat=True).first()
    return Position(0, last_id or 0)


def messages(endpoint: Endpoint, rows: list[FeedRow]) -> list[dict[str, Any]]:
    """The rows as the consumer API shows them: each one's body and signature headers
    exactly as a push of it would carry them now (the push path's rendering and signing).

    Raises `payloads.PayloadUnavailable` when offloaded data cannot be read back, as a
    push attempt would."""
    if not rows:
        return []
    now = timezone.now()
    secrets = [secret.value for secret in endpoint.secrets.unexpired(now)]
    private_keys = signing_keys(endpoint, now) or []
    timestamp = int(now.timestamp())
    by_id = Delivery.objects.select_related("event").in_bulk([row.delivery_id for row in rows])
    answer = []
    for row in rows:
        delivery = by_id.get(row.delivery_id)
        if delivery is None:
            continue  # erased or purged since the read
        delivery.endpoint = endpoint
        body = render_body(delivery.event, endpoint)
        headers = message_headers(delivery, body, secrets, timestamp, private_keys=private_keys)
        event = delivery.event
        answer.append(
            {
                "id": str(event.pk),
                "type": event.type,
                "timestamp": utc_text(event.occurred_at),
                "payload": json.loads(body),
                "body": body.decode("utf-8"),
                "headers": headers,
            }
        )
    return answer
