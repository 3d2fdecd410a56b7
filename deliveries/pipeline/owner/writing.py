"""An owner's recordings: each round's results written in one transaction (`group_commit`,
grouped with other owners' rounds), and a round whose requests all succeeded written
beside the owner while its next round's requests are out, so that the writing is no
link in the chain of an owner's rounds."""

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, connection

from deliveries.pipeline.group_commit import record_round
from deliveries.pipeline.record import Deferral, Result, Round
from webhooks_core.db.connections import connections_pooled, give_back_pooled_connection
from webhooks_core.db.sql import aborted_by_a_concurrent_write, tried_again
from webhooks_core.runtime.cooperative import start_beside

logger = logging.getLogger("deliveries.pipeline.owner")


# A recording the database aborts for a deadlock (with an endpoint's deletion, say) is
# written again this many times in all.
RECORDING_TRIES = 3


def _recorded(r: Round) -> dict[int, str]:
    """`record_round`, written again when the database aborted it for a deadlock: its
    writes hold each row to its claim's token, so a second write is safe, and a deleted
    endpoint's rows come back `LEASE_LOST`."""
    return tried_again(
        lambda: record_round(r),
        tries=RECORDING_TRIES,
        when=aborted_by_a_concurrent_write,
        what=f"the recording of endpoint {r.endpoint.pk}",
    )


class RecordingTimedOut(RuntimeError):
    """A recording did not end within the wait its owner's lease allows."""


class Writer:
    def __init__(
        self,
        endpoint_id: str,
        round_of: Callable[[list[Result], Deferral], Round | None],
        noted: Callable[[dict[int, str]], None],
    ) -> None:
        self.endpoint_id = endpoint_id
        self._round_of = round_of
        self._noted = noted
        # Finished, not yet recorded: a round that all succeeded is recorded just after
        # the next round's requests start, and while they are out (`write_meanwhile`),
        # together with the rounds that succeeded while an earlier recording was still
        # being written.
        self.unrecorded: list[Result] = []
        self._recording: tuple[threading.Event, dict[str, Any]] | None = None
        # Rounds in hand when waiting for that recording failed: `abort` writes them.
        self.unwritten: list[tuple[list[Result], Deferral]] = []
        self.deleted = False

    def write(self, results: list[Result], deferral: Deferral, *, wait: float | None) -> None:
        """Record a round here, after the recording beside us (waited for at most
        `wait` seconds)."""
        try:
            self.await_recording(wait)
        except BaseException:
            self.unwritten.append((results, deferral))  # (not lost: `abort` writes them)
            raise
        r = self._round_of(results, deferral)
        if r is None:
            return
        try:
            self._noted(_recorded(r))
        except IntegrityError:
            self._deleted_meanwhile()

    def write_meanwhile(self, *, wait: float | None) -> None:
        """Record the rounds that all succeeded while the owner goes on with the next
        one: in a greenlet or thread of its own where database connections are pooled,
        else here. One such recording at a time: the owner waits for it before it
        records anything else, renews its lease or ends its turn."""
        # (The rounds stay in `unrecorded` until the last recording is waited for: if
        # that fails, `abort` writes them.)
        self.await_recording(wait)
        results, self.unrecorded = self.unrecorded, []
        if not connections_pooled():
            self.write(results, Deferral([]), wait=wait)
            return
        r = self._round_of(results, Deferral([]))
        if r is None:
            return
        box: dict[str, Any] = {}
        done = threading.Event()

        def write() -> None:
            try:
                box["outcomes"] = _recorded(r)
            except BaseException as exc:  # (answered to the owner when it waits)
                box["error"] = (
                    exc if isinstance(exc, Exception) else RuntimeError(f"interrupted: {exc!r}")
                )
            finally:
                try:
                    connection.close()  # the pooled connection given back
                except Exception:
                    # (A greenlet's error would go to gevent's hub; a connection that
                    # cannot close cleanly is dropped by the pool anyway.)
                    logger.warning("closing the recording's connection failed", exc_info=True)
                finally:
                    done.set()

        self._recording = (done, box)
        start_beside(write)

    def busy(self) -> bool:
        """Whether the recording `write_meanwhile` started is still being written."""
        return self._recording is not None and not self._recording[0].is_set()

    def await_recording(self, timeout: float | None) -> None:
        """Wait for the recording `write_meanwhile` started (at most `timeout`: then it
        goes on alone, and `RecordingTimedOut` says so); its error is ours."""
        if self._recording is None:
            return
        done, box = self._recording
        # Waiting holds no pooled connection: the writer may need the pool's last one.
        give_back_pooled_connection()
        done.wait(timeout)
        self._recording = None
        error = box.get("error")
        if isinstance(error, IntegrityError):
            self._deleted_meanwhile()
        elif error is not None:
            raise error
        elif "outcomes" not in box:
            raise RecordingTimedOut("the recording of a round did not end in time")
        else:
            self._noted(box["outcomes"])

    def _deleted_meanwhile(self) -> None:
        # The endpoint (and its rows) was deleted while its requests were out.
        logger.info("endpoint %s deleted while sending; results dropped", self.endpoint_id)
        self.deleted = True
