"""Long polling: waiting for an endpoint's next message at no cost.

A waiting request holds no database connection (it gives it back before it waits) and,
under the `web` process's gevent workers, no thread: it waits on an event of this
process's hub. Fan-out, after committing deliveries of an endpoint with a reader,
`notify`s it: the hub's events of that endpoint in this process are set, and the notice
is published on Redis (channel ``webhooks:poll:<endpoint id>``), where one subscriber per
process (a thread, a greenlet under gevent) sets the events of its own waiters. Without
Redis (the embedded default, one process) the local events are all there is, and waiters
also read again every ``WEBHOOKS_POLL_RECHECK_SECONDS``. With Redis they read again every
few seconds besides, so a lost notice costs a few seconds, never a message.

Waits are bounded per key and per process (``WEBHOOKS_POLL_MAX_WAITS_PER_KEY``,
``WEBHOOKS_POLL_MAX_WAITS_PER_PROCESS``).
"""

import contextlib
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

from deliveries import conf as delivery_conf

logger = logging.getLogger(__name__)

CHANNEL_PREFIX = "webhooks:poll:"
#: With the subscriber listening, a waiter still reads again this often.
SAFETY_RECHECK_SECONDS = 5.0
#: After a notice whose message is hidden (`feed.rows_hidden`: an older transaction
#: anywhere on the database server still runs, most often for milliseconds, one in its
#: commit), the waiter reads again after this, doubling up to `AFTER_NOTICE_MAX_SECONDS`,
#: until it is not: the message reaches it within about as long again as it was hidden,
#: and within a second however long that was.
AFTER_NOTICE_RECHECK_SECONDS = 0.02
AFTER_NOTICE_MAX_SECONDS = 1.0


class TooManyWaits(Exception):
    """A bound on long polls is reached; ``retry_after`` seconds is a fair wait."""

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _Hub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, set[threading.Event]] = defaultdict(set)
        self._per_key: dict[str, int] = defaultdict(int)
        self._total = 0
        self._subscriber: threading.Thread | None = None
        self.listening = False

    @contextlib.contextmanager
    def waiting(self, endpoint_id: str, key: str) -> Iterator[threading.Event]:
        """A registered event for one waiting request; `TooManyWaits` over the bounds."""
        bounds = delivery_conf.poll()
        with self._lock:
            if self._total >= bounds.max_waits_per_process:
                raise TooManyWaits("This server holds as many long polls as it may.")
            if self._per_key[key] >= bounds.max_waits_per_key:
                raise TooManyWaits(
                    f"This key already holds {bounds.max_waits_per_key} long polls "
                    "(WEBHOOKS_POLL_MAX_WAITS_PER_KEY)."
                )
            self._total += 1
            self._per_key[key] += 1
            event = threading.Event()
            self._events[endpoint_id].add(event)
        self._ensure_subscriber()
        try:
            yield event
        finally:
            with self._lock:
                self._total -= 1
                self._per_key[key] -= 1
                if not self._per_key[key]:
                    del self._per_key[key]
                self._events[endpoint_id].discard(event)
                if not self._events[endpoint_id]:
                    del self._events[endpoint_id]

    def wake_local(self, endpoint_ids: Iterable[str]) -> None:
        with self._lock:
            for endpoint_id in endpoint_ids:
                for event in self._events.get(endpoint_id, ()):
                    event.set()

    def counts(self) -> tuple[int, int]:
        """(waiting requests, keys with one) in this process."""
        with self._lock:
            return self._total, len(self._per_key)

    def _ensure_subscriber(self) -> None:
        if self._subscriber is not None or not _redis_url():
            return
        with self._lock:
            if self._subscriber is None:
                self._subscriber = threading.Thread(
                    target=self._listen, name="poll-notices", daemon=True
                )
                self._subscriber.start()

    def _listen(self) -> None:
        import redis

        while True:
            try:
                client = redis.Redis.from_url(_redis_url(), socket_connect_timeout=2)
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                pubsub.psubscribe(CHANNEL_PREFIX + "*")
                self.listening = True
                for message in pubsub.listen():
                    channel = message.get("channel", b"")
                    if isinstance(channel, bytes):
                        channel = channel.decode("ascii", "replace")
                    self.wake_local([str(channel).removeprefix(CHANNEL_PREFIX)])
            except Exception:
                logger.warning("poll notices: Redis subscription lost; retrying", exc_info=True)
            self.listening = False
            time.sleep(1.0)


_hub = _Hub()


def hub() -> _Hub:
    return _hub


def _redis_url() -> str:
    return delivery_conf.counters().redis_url


_publisher: Any = None


def notify(endpoint_ids: Iterable[Any]) -> None:
    """Tell every waiter of these endpoints, in every web process, to read again. Never
    raises: a lost notice costs a waiter one recheck interval."""
    ids = [str(endpoint_id) for endpoint_id in endpoint_ids]
    if not ids:
        return
    _hub.wake_local(ids)
    url = _redis_url()
    if not url:
        return
    global _publisher
    try:
        if _publisher is None:
            import redis

            _publisher = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        pipe = _publisher.pipeline(transaction=False)
        for endpoint_id in ids:
            pipe.publish(CHANNEL_PREFIX + endpoint_id, b"1")
        pipe.execute()
    except Exception:
        logger.warning("poll notices: could not publish", exc_info=True)


def recheck_interval(*, reads_since_notice: int | None) -> float:
    """How long a waiter waits before reading again; `reads_since_notice` is None until a
    notice came, then counts the reads that found nothing since the last one."""
    if reads_since_notice is not None:
        return min(AFTER_NOTICE_RECHECK_SECONDS * 2**reads_since_notice, AFTER_NOTICE_MAX_SECONDS)
    if _hub.listening:
        return SAFETY_RECHECK_SECONDS
    return delivery_conf.poll().recheck_seconds
