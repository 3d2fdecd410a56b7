"""Group commit of the owners' recordings within one process.

Owners whose rounds end while another owner's recording is being written do not each
open a transaction of their own: they queue, and when that recording commits, the
first of them writes all the queued rounds at once (`record.record_rounds`: one
insert of their attempts, one update of their succeeded rows). Nobody waits for a
timer: the batch is whatever queued while the last one was written, so a lone owner
writes at once, and a busy process writes many rounds per transaction instead of one.

The rows of an endpoint deleted while its requests were out get no attempt and count
for nothing (`record.record_rounds`). A batch the database refuses all the same (a
value out of a column's range, a deletion that commits while the batch is written) is
written again round by round, so that only the round at fault gets the error. Every
waiter is answered, even when the writer is killed (a time limit, a shutdown) in the
middle of a batch.
"""

import threading
from collections import deque
from dataclasses import dataclass, field

from deliveries.pipeline.record import Round, record_rounds
from webhooks_core.db.connections import give_back_pooled_connection

# The most rounds one transaction writes (a bound on its statements' size).
MAX_ROUNDS_PER_BATCH = 200


@dataclass(eq=False)
class _Waiter:
    round: Round
    done: threading.Event = field(default_factory=threading.Event)
    # Set by the writer before `done`: the round's outcomes, its error, or that this
    # waiter is to write the next batch.
    outcomes: dict[int, str] | None = None
    error: BaseException | None = None
    writes_next: bool = False


_lock = threading.Lock()
_queue: deque[_Waiter] = deque()
_writing = False


def record_round(r: Round) -> dict[int, str]:
    """Record the round, with whatever other rounds wait to be recorded; returns its
    outcomes (raises what recording it alone would raise)."""
    global _writing
    waiter = _Waiter(r)
    with _lock:
        _queue.append(waiter)
        writes = not _writing
        _writing = True
    if not writes:
        # Waiting holds no pooled connection: the writer may need it.
        give_back_pooled_connection()
        try:
            waiter.done.wait()
        except BaseException:
            _leave(waiter)
            raise
        if not waiter.writes_next:
            return _answer(waiter)
    _write_one_batch()
    return _answer(waiter)


def _leave(waiter: _Waiter) -> None:
    """A waiter stopped while it waited (a time limit): out of the queue, and if it was
    to write the next batch, the writing goes on to the one behind it (else nobody
    would write again). A round already taken into a batch is written all the same."""
    global _writing
    with _lock:
        if waiter in _queue:
            _queue.remove(waiter)
        if not waiter.writes_next:
            return
        following = _queue[0] if _queue else None
        if following is None:
            _writing = False
        else:
            following.writes_next = True
    if following is not None:
        following.done.set()


def _answer(waiter: _Waiter) -> dict[int, str]:
    if waiter.error is not None:
        raise waiter.error
    assert waiter.outcomes is not None
    return waiter.outcomes


def _write_one_batch() -> None:
    """Write what is queued (our own round among it), then hand the writing on to the
    first waiter queued since, or end it."""
    global _writing
    with _lock:
        batch = [_queue.popleft() for _ in range(min(len(_queue), MAX_ROUNDS_PER_BATCH))]
    try:
        _write(batch)
    finally:
        for waiter in batch:
            if waiter.outcomes is None and waiter.error is None:
                # We were stopped before answering it: its round may not be written.
                waiter.error = RuntimeError("the recording of this round was interrupted")
        with _lock:
            following = _queue[0] if _queue else None
            if following is None:
                _writing = False
            else:
                following.writes_next = True
        for waiter in batch:
            waiter.done.set()
        if following is not None:
            following.done.set()


def _write(batch: list[_Waiter]) -> None:
    try:
        outcomes = record_rounds([waiter.round for waiter in batch])
    except Exception as exc:
        if len(batch) == 1:
            batch[0].error = exc
            return
        # Round by round: only the round at fault gets the error.
        for waiter in batch:
            try:
                waiter.outcomes = record_rounds([waiter.round])[0]
            except Exception as one:
                waiter.error = one
        return
    for waiter, done in zip(batch, outcomes, strict=True):
        waiter.outcomes = done
