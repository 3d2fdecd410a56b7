"""The feed's position and the iterator that carries it. Pure: no Django, no I/O.

A position is ``(xid, id)``: on PostgreSQL the id of the transaction that inserted the
delivery (``feed_xid``, written by the database) and the delivery's id; on SQLite the id
alone (xid 0), its writes being serialized. The feed reads rows after a position in that
order, and on PostgreSQL only rows whose transaction is below the snapshot's xmin (see
``feed`` and the design page), so a row can never appear behind a position already read.

An iterator is ``it1_`` + base64url(JSON ``[endpoint id, xid, id, at]``), ``at`` being
the Unix time of the row at the position (or of the start): an iterator whose ``at`` is
older than the retention is answered 410. It is not signed: it holds nothing its holder
may not see, and every read is limited to the endpoint of the key that reads; a forged
position only skips or repeats the forger's own messages.
"""

import base64
import binascii
import json
from dataclasses import dataclass

PREFIX = "it1_"
# Far more than any real iterator (about 100 characters): refused before decoding.
MAX_LENGTH = 300


@dataclass(frozen=True, order=True)
class Position:
    xid: int
    id: int

    def __post_init__(self) -> None:
        if self.xid < 0 or self.id < 0:
            raise ValueError("a position is never negative")


#: Before every row: the start of an endpoint's feed.
START = Position(0, 0)


@dataclass(frozen=True)
class Cursor:
    """A decoded iterator: where it stands, and the time of that place."""

    endpoint_id: str
    position: Position
    at: float


class InvalidIterator(ValueError):
    """Not an iterator of this endpoint (the message is safe to show)."""


def encode(cursor: Cursor) -> str:
    raw = json.dumps(
        [cursor.endpoint_id, cursor.position.xid, cursor.position.id, round(cursor.at, 3)],
        separators=(",", ":"),
    ).encode("ascii")
    return PREFIX + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode(token: str, *, endpoint_id: str) -> Cursor:
    """The cursor of ``token``; `InvalidIterator` if it is malformed or another
    endpoint's."""
    if not isinstance(token, str) or not token.startswith(PREFIX) or len(token) > MAX_LENGTH:
        raise InvalidIterator("This is not an iterator this API gave.")
    encoded = token.removeprefix(PREFIX)
    try:
        raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidIterator("This is not an iterator this API gave.") from None
    if (
        not isinstance(value, list)
        or len(value) != 4
        or not isinstance(value[0], str)
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in value[1:3])
        or not isinstance(value[3], int | float)
        or isinstance(value[3], bool)
    ):
        raise InvalidIterator("This is not an iterator this API gave.")
    if value[0] != endpoint_id:
        raise InvalidIterator("This iterator belongs to another endpoint.")
    try:
        position = Position(value[1], value[2])
    except ValueError:
        raise InvalidIterator("This is not an iterator this API gave.") from None
    return Cursor(endpoint_id, position, float(value[3]))


def expired(cursor: Cursor, *, now: float, retention_seconds: float) -> bool:
    """Whether the messages after ``cursor`` may already have been purged."""
    return cursor.at < now - retention_seconds
