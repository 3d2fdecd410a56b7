"""Counters shared by every worker: in-flight slots, breaker windows, rate limits.

They live in Redis (a key prefix of their own on the broker's Redis by default) so that
all worker processes on all machines see the same numbers. Every key expires: a worker that
dies holding an in-flight slot frees it when the slot's lease runs out. In the embedded mode
(one process, no Redis) the same interface is kept in memory. No Django here.
"""

import math
import threading
import time
from collections import defaultdict
from functools import lru_cache
from typing import Protocol

import redis
from limits import RateLimitItemPerSecond
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

KEY_PREFIX = "webhooks:health:"
WINDOW_BUCKETS = 10
DENIAL_BUCKET_SECONDS = 5

# Purge expired slots, then take one if fewer than the limit are held. Redis's own clock
# is used, so workers on machines with skewed clocks agree on expiry.
ACQUIRE_SLOT = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], t + tonumber(ARGV[2]), ARGV[3])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 1)
  return 1
end
return 0
"""
# The same for up to ARGV[4] slots at once, named ARGV[3]:0, ARGV[3]:1, ...; returns how
# many were taken.
ACQUIRE_SLOTS = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t)
local n = math.min(tonumber(ARGV[1]) - redis.call('ZCARD', KEYS[1]), tonumber(ARGV[4]))
if n <= 0 then
  return 0
end
for i = 0, n - 1 do
  redis.call('ZADD', KEYS[1], t + tonumber(ARGV[2]), ARGV[3] .. ':' .. i)
end
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 1)
return n
"""
# How long an endpoint's last batch held its slots is kept this long: a hint for how long
# a refused batch should wait for a slot.
HOLD_TTL_SECONDS = 600


class HealthStore(Protocol):
    def acquire_slot(self, endpoint: str, token: str, limit: int, ttl: float) -> bool: ...

    def release_slot(self, endpoint: str, token: str) -> None: ...

    def acquire_slots(self, endpoint: str, token: str, limit: int, ttl: float, wanted: int) -> int:
        """Take up to `wanted` slots while fewer than `limit` are held; returns how many."""
        ...

    def release_slots(self, endpoint: str, token: str, count: int, held_seconds: float) -> None:
        """Free the slots `acquire_slots` took, noting how long they were held."""
        ...

    def slot_wait(self, endpoint: str, limit: int) -> float | None:
        """0 when fewer than `limit` slots are held now (a hint: acquiring decides), else how
        long the endpoint's last batch held its slots (None when not known)."""
        ...

    def slot_free(self, endpoint: str, limit: int) -> bool:
        """Whether fewer than `limit` slots are held now (a hint: `acquire_slot` decides)."""
        ...

    def record_outcomes(
        self, endpoint: str, attempts: int, failures: int, window: float
    ) -> tuple[int, int]:
        """Count attempts; return (attempts, failures) in the window, these included."""
        ...

    def count_outcomes(self, endpoint: str, attempts: int, failures: int, window: float) -> None:
        """Count attempts without reading the window back (nothing depends on it now)."""
        ...

    def reset_window(self, endpoint: str, window: float) -> None: ...

    def note_denial(self, endpoint: str) -> int:
        """Count a refused admission; return how many were refused in the last seconds."""
        ...

    def rate_limit_wait(self, scope: str, key: str, per_second: int) -> float:
        """Take one request from the limit: 0 when allowed, else seconds until it may be."""
        ...


def _bucket_size(window: float) -> float:
    return max(window / WINDOW_BUCKETS, 0.001)


class _RateLimits:
    def __init__(self, storage_url: str) -> None:
        options = {"key_prefix": KEY_PREFIX + "rate"} if storage_url.startswith("redis") else {}
        self.limiter = MovingWindowRateLimiter(storage_from_string(storage_url, **options))

    def wait(self, scope: str, key: str, per_second: int) -> float:
        item = RateLimitItemPerSecond(per_second)
        if self.limiter.hit(item, scope, key):
            return 0.0
        reset_at = self.limiter.get_window_stats(item, scope, key).reset_time
        return max(reset_at - time.time(), 0.01)


class RedisHealthStore:
    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self._acquire = self.client.register_script(ACQUIRE_SLOT)
        self._acquire_many = self.client.register_script(ACQUIRE_SLOTS)
        self._rates = _RateLimits(url)

    def acquire_slot(self, endpoint: str, token: str, limit: int, ttl: float) -> bool:
        key = f"{KEY_PREFIX}inflight:{endpoint}"
        return bool(self._acquire(keys=[key], args=[limit, ttl, token]))

    def slot_free(self, endpoint: str, limit: int) -> bool:
        key = f"{KEY_PREFIX}inflight:{endpoint}"
        return int(self.client.zcount(key, f"({time.time()}", "+inf")) < limit

    def release_slot(self, endpoint: str, token: str) -> None:
        self.client.zrem(f"{KEY_PREFIX}inflight:{endpoint}", token)

    def acquire_slots(self, endpoint: str, token: str, limit: int, ttl: float, wanted: int) -> int:
        key = f"{KEY_PREFIX}inflight:{endpoint}"
        return int(self._acquire_many(keys=[key], args=[limit, ttl, token, wanted]))

    def release_slots(self, endpoint: str, token: str, count: int, held_seconds: float) -> None:
        pipe = self.client.pipeline(transaction=False)
        if count:
            pipe.zrem(f"{KEY_PREFIX}inflight:{endpoint}", *(f"{token}:{n}" for n in range(count)))
        pipe.set(f"{KEY_PREFIX}hold:{endpoint}", f"{held_seconds:.3f}", ex=HOLD_TTL_SECONDS)
        pipe.execute()

    def slot_wait(self, endpoint: str, limit: int) -> float | None:
        pipe = self.client.pipeline(transaction=False)
        pipe.zcount(f"{KEY_PREFIX}inflight:{endpoint}", f"({time.time()}", "+inf")
        pipe.get(f"{KEY_PREFIX}hold:{endpoint}")
        held, hold = pipe.execute()
        if int(held) < limit:
            return 0.0
        return float(hold) if hold is not None else None

    def _window_keys(self, endpoint: str, window: float) -> list[str]:
        size = _bucket_size(window)
        current = math.floor(time.time() / size)
        return [f"{KEY_PREFIX}window:{endpoint}:{current - n}" for n in range(WINDOW_BUCKETS)]

    def record_outcomes(
        self, endpoint: str, attempts: int, failures: int, window: float
    ) -> tuple[int, int]:
        keys = self._window_keys(endpoint, window)
        pipe = self.client.pipeline(transaction=False)
        pipe.hincrby(keys[0], "total", attempts)
        pipe.hincrby(keys[0], "failed", failures)
        pipe.expire(keys[0], math.ceil(window + _bucket_size(window)) + 1)
        for key in keys:
            pipe.hmget(key, ["total", "failed"])
        replies = pipe.execute()[3:]
        total = sum(int(t or 0) for t, _ in replies)
        failures = sum(int(f or 0) for _, f in replies)
        return total, failures

    def count_outcomes(self, endpoint: str, attempts: int, failures: int, window: float) -> None:
        key = self._window_keys(endpoint, window)[0]
        pipe = self.client.pipeline(transaction=False)
        pipe.hincrby(key, "total", attempts)
        if failures:
            pipe.hincrby(key, "failed", failures)
        pipe.expire(key, math.ceil(window + _bucket_size(window)) + 1)
        pipe.execute()

    def reset_window(self, endpoint: str, window: float) -> None:
        self.client.delete(*self._window_keys(endpoint, window))

    def note_denial(self, endpoint: str) -> int:
        key = f"{KEY_PREFIX}denied:{endpoint}:{int(time.time() // DENIAL_BUCKET_SECONDS)}"
        pipe = self.client.pipeline(transaction=False)
        pipe.incr(key)
        pipe.expire(key, DENIAL_BUCKET_SECONDS * 2)
        return int(pipe.execute()[0])

    def rate_limit_wait(self, scope: str, key: str, per_second: int) -> float:
        return self._rates.wait(scope, key, per_second)


class LocalHealthStore:
    """The same counters in this process's memory: right only when one process sends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, dict[str, float]] = defaultdict(dict)
        self._windows: dict[str, list[tuple[float, bool]]] = defaultdict(list)
        self._denials: dict[str, list[float]] = defaultdict(list)
        self._holds: dict[str, float] = {}
        self._rates = _RateLimits("memory://")

    def acquire_slot(self, endpoint: str, token: str, limit: int, ttl: float) -> bool:
        now = time.monotonic()
        with self._lock:
            slots = self._slots[endpoint]
            for held, expires in list(slots.items()):
                if expires <= now:
                    del slots[held]
            if len(slots) >= limit:
                return False
            slots[token] = now + ttl
            return True

    def slot_free(self, endpoint: str, limit: int) -> bool:
        now = time.monotonic()
        with self._lock:
            return sum(1 for expires in self._slots[endpoint].values() if expires > now) < limit

    def release_slot(self, endpoint: str, token: str) -> None:
        with self._lock:
            self._slots[endpoint].pop(token, None)

    def acquire_slots(self, endpoint: str, token: str, limit: int, ttl: float, wanted: int) -> int:
        now = time.monotonic()
        with self._lock:
            slots = self._slots[endpoint]
            for held, expires in list(slots.items()):
                if expires <= now:
                    del slots[held]
            count = max(0, min(limit - len(slots), wanted))
            for n in range(count):
                slots[f"{token}:{n}"] = now + ttl
            return count

    def release_slots(self, endpoint: str, token: str, count: int, held_seconds: float) -> None:
        with self._lock:
            for n in range(count):
                self._slots[endpoint].pop(f"{token}:{n}", None)
            self._holds[endpoint] = held_seconds

    def slot_wait(self, endpoint: str, limit: int) -> float | None:
        now = time.monotonic()
        with self._lock:
            held = sum(1 for expires in self._slots[endpoint].values() if expires > now)
            return 0.0 if held < limit else self._holds.get(endpoint)

    def record_outcomes(
        self, endpoint: str, attempts: int, failures: int, window: float
    ) -> tuple[int, int]:
        now = time.monotonic()
        with self._lock:
            outcomes = [o for o in self._windows[endpoint] if o[0] > now - window]
            outcomes += [(now, n < failures) for n in range(attempts)]
            self._windows[endpoint] = outcomes
            return len(outcomes), sum(1 for _, f in outcomes if f)

    def count_outcomes(self, endpoint: str, attempts: int, failures: int, window: float) -> None:
        self.record_outcomes(endpoint, attempts, failures, window)

    def reset_window(self, endpoint: str, window: float) -> None:
        with self._lock:
            self._windows.pop(endpoint, None)

    def note_denial(self, endpoint: str) -> int:
        now = time.monotonic()
        with self._lock:
            recent = [t for t in self._denials[endpoint] if t > now - DENIAL_BUCKET_SECONDS]
            recent.append(now)
            self._denials[endpoint] = recent
            return len(recent)

    def rate_limit_wait(self, scope: str, key: str, per_second: int) -> float:
        return self._rates.wait(scope, key, per_second)


@lru_cache(maxsize=4)
def get_store(redis_url: str) -> HealthStore:
    """One store per process (and URL); Redis when a URL is given, else memory."""
    return RedisHealthStore(redis_url) if redis_url else LocalHealthStore()
