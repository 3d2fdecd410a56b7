"""Wake marks: at most one "endpoint E has work" message out per endpoint. No Django here.

A mark per endpoint holds when the next wake is due (Redis's clock, seconds): a message
queued for then, or 0 while an owner works the endpoint (it looks at the database again
before it stops, so a wake then would only duplicate it). A wake dispatches a message
only when it would come sooner than the one already marked, so one busy endpoint costs one
message per owner's turn, not one per event. An endpoint on hold is marked with the hold's
end, a message queued for then, and that mark folds every wake: none could do anything
sooner. Every mark expires: a lost message or a dead owner is forgotten after a while, and
the sweeper overrides a mark gone stale.

The marks are an optimisation of the message count, never a guarantee: the database says
what is due, the owner's lease who sends it. On a Redis error the caller dispatches anyway.
"""

import math
import threading
import time
from functools import lru_cache
from typing import Any, Protocol

import redis

KEY_PREFIX = "webhooks:wake:"
# The fan-out's mark (`deliveries.pipeline.fanout_mark`), one per database: a fan-out
# message is out.
FAN_OUT_KEY = "webhooks:fan-out:"
WORKING = 0.0

# KEYS[1] the mark; ARGV[1] seconds from now the wake is for, ARGV[2] how long the mark
# lives past that, ARGV[3] a mark older than this many seconds past its due time is
# overridden (the sweeper's check for a lost message), or -1 never.
# Returns 1 when the caller should dispatch.
MARK = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local due = now + tonumber(ARGV[1])
local current = redis.call('GET', KEYS[1])
if current then
  local held = string.sub(current, 1, 1) == 'h'
  local at = tonumber(held and string.sub(current, 2) or current)
  local stale = tonumber(ARGV[3]) >= 0 and now - at > tonumber(ARGV[3])
  if (held or at <= due + 0.001) and not stale then
    return 0
  end
end
redis.call('SET', KEYS[1], string.format('%.3f', due), 'PX',
  math.ceil((tonumber(ARGV[1]) + tonumber(ARGV[2])) * 1000))
return 1
"""
# KEYS[1] the mark; ARGV[1] its lifetime: an owner works the endpoint.
WORK = """
redis.call('SET', KEYS[1], '0', 'PX', math.ceil(tonumber(ARGV[1]) * 1000))
return 1
"""
# KEYS[1] the mark; ARGV[1] seconds from now the endpoint's hold ends (a message is queued
# for then), ARGV[2] how long the mark lives past that. Until it expires it folds every
# wake ("h" and the hold's end; a stale one is overridden as any other).
HOLD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('SET', KEYS[1], 'h' .. string.format('%.3f', now + tonumber(ARGV[1])), 'PX',
  math.ceil((tonumber(ARGV[1]) + tonumber(ARGV[2])) * 1000))
return 1
"""


class WakeBook(Protocol):
    def mark(self, endpoint: str, in_seconds: float, ttl: float, stale_after: float) -> bool:
        """Note a wake due `in_seconds` from now; True when a message should be dispatched
        (no sooner wake or working owner is marked, or the mark is stale)."""
        ...

    def mark_many(
        self, endpoints: list[str], in_seconds: float, ttl: float, stale_after: float
    ) -> list[bool]:
        """`mark` for each endpoint, in one exchange where the book can."""
        ...

    def working(self, endpoint: str, ttl: float) -> None:
        """An owner works the endpoint (wakes are folded into its next look)."""
        ...

    def held(self, endpoint: str, in_seconds: float, ttl: float) -> None:
        """The endpoint is on hold for `in_seconds`, a message queued for then: every wake
        is folded until the mark expires `ttl` after that."""
        ...

    def clear(self, endpoint: str) -> None:
        """The owner is about to stop: the next wake dispatches a message."""
        ...

    def due_at(self, endpoint: str) -> float | None:
        """The mark as a Unix time (0: an owner works; a hold's: its end), or None."""
        ...

    def mark_fan_out(self, name: str, ttl: float) -> bool:
        """Note that a fan-out message is out; True when none was (the caller dispatches)."""
        ...

    def clear_fan_out(self, name: str) -> None:
        """A fan-out is about to read the waiting events: the next commit dispatches."""
        ...


class RedisWakeBook:
    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self._mark = self.client.register_script(MARK)
        self._work = self.client.register_script(WORK)
        self._hold = self.client.register_script(HOLD)

    def mark(self, endpoint: str, in_seconds: float, ttl: float, stale_after: float) -> bool:
        args = [max(in_seconds, 0.0), ttl, stale_after]
        return bool(self._mark(keys=[KEY_PREFIX + endpoint], args=args))

    def mark_many(
        self, endpoints: list[str], in_seconds: float, ttl: float, stale_after: float
    ) -> list[bool]:
        # One pipeline: an event fanned out to ten endpoints costs one round trip, not ten.
        # By the script's hash (EVALSHA), not redis-py's pipelined scripts, which ask
        # Redis whether the script is loaded first: a second round trip on every wake.
        keys = [KEY_PREFIX + endpoint for endpoint in endpoints]
        args = [max(in_seconds, 0.0), ttl, stale_after]
        answers = self._mark_all(keys, args)
        missing = [i for i, answer in enumerate(answers) if _no_script(answer)]
        if missing:
            # Not loaded yet, or Redis restarted (or its scripts were flushed): those did
            # not run; the others did and are not run twice.
            self._mark.sha = self.client.script_load(MARK)
            again = self._mark_all([keys[i] for i in missing], args)
            for i, answer in zip(missing, again, strict=True):
                answers[i] = answer
        for answer in answers:
            if isinstance(answer, Exception):
                raise answer
        return [bool(fresh) for fresh in answers]

    def _mark_all(self, keys: list[str], args: list[float]) -> list[Any]:
        with self.client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.evalsha(self._mark.sha, 1, key, *args)
            return list(pipe.execute(raise_on_error=False))

    def working(self, endpoint: str, ttl: float) -> None:
        self._work(keys=[KEY_PREFIX + endpoint], args=[ttl])

    def held(self, endpoint: str, in_seconds: float, ttl: float) -> None:
        self._hold(keys=[KEY_PREFIX + endpoint], args=[max(in_seconds, 0.0), ttl])

    def clear(self, endpoint: str) -> None:
        self.client.delete(KEY_PREFIX + endpoint)

    def due_at(self, endpoint: str) -> float | None:
        value = self.client.get(KEY_PREFIX + endpoint)
        if value is None:
            return None
        text = value.decode() if isinstance(value, bytes) else str(value)
        return float(text.removeprefix("h"))  # a hold's mark: "h" and the hold's end

    def mark_fan_out(self, name: str, ttl: float) -> bool:
        key = FAN_OUT_KEY + name
        return bool(self.client.set(key, b"1", nx=True, px=math.ceil(ttl * 1000)))

    def clear_fan_out(self, name: str) -> None:
        self.client.delete(FAN_OUT_KEY + name)


class LocalWakeBook:
    """The same marks in this process's memory (the embedded mode: one process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # due, expires (Unix times), and whether it is a hold's (it folds every wake)
        self._marks: dict[str, tuple[float, float, bool]] = {}

    def _current(self, endpoint: str, now: float) -> float | None:
        entry = self._marks.get(endpoint)
        if entry is None or entry[1] <= now:
            self._marks.pop(endpoint, None)
            return None
        return entry[0]

    def mark(self, endpoint: str, in_seconds: float, ttl: float, stale_after: float) -> bool:
        now = time.time()
        due = now + max(in_seconds, 0.0)
        with self._lock:
            current = self._current(endpoint, now)
            if current is not None:
                held = self._marks[endpoint][2]
                stale = stale_after >= 0 and now - current > stale_after
                if (held or current <= due + 0.001) and not stale:
                    return False
            self._marks[endpoint] = (due, due + ttl, False)
            return True

    def mark_many(
        self, endpoints: list[str], in_seconds: float, ttl: float, stale_after: float
    ) -> list[bool]:
        return [self.mark(endpoint, in_seconds, ttl, stale_after) for endpoint in endpoints]

    def working(self, endpoint: str, ttl: float) -> None:
        with self._lock:
            self._marks[endpoint] = (WORKING, time.time() + ttl, False)

    def held(self, endpoint: str, in_seconds: float, ttl: float) -> None:
        until = time.time() + max(in_seconds, 0.0)
        with self._lock:
            self._marks[endpoint] = (until, until + ttl, True)

    def clear(self, endpoint: str) -> None:
        with self._lock:
            self._marks.pop(endpoint, None)

    def due_at(self, endpoint: str) -> float | None:
        with self._lock:
            return self._current(endpoint, time.time())

    def mark_fan_out(self, name: str, ttl: float) -> bool:
        now = time.time()
        with self._lock:
            if self._current(FAN_OUT_KEY + name, now) is not None:
                return False
            self._marks[FAN_OUT_KEY + name] = (now, now + ttl, False)
            return True

    def clear_fan_out(self, name: str) -> None:
        self.clear(FAN_OUT_KEY + name)


def _no_script(answer: Any) -> bool:
    return isinstance(answer, redis.exceptions.NoScriptError)


@lru_cache(maxsize=4)
def get_book(redis_url: str) -> WakeBook:
    """One book per process (and URL); Redis when a URL is given, else memory."""
    return RedisWakeBook(redis_url) if redis_url else LocalWakeBook()
