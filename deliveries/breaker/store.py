"""Counters shared by every worker: breaker windows, rate limits.

They live in Redis (a key prefix of their own on the broker's Redis by default) so that
all worker processes on all machines see the same numbers. Every key expires. In the
embedded mode (one process, no Redis) the same interface is kept in memory. No Django here.
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


class HealthStore(Protocol):
    def record_outcomes(
        self, endpoint: str, attempts: int, failures: int, window: float
    ) -> tuple[int, int]:
        """Count attempts; return (attempts, failures) in the window, these included."""
        ...

    def count_outcomes(self, counts: dict[str, tuple[int, int]], window: float) -> None:
        """Count attempts, `{endpoint: (attempts, failures)}`, without reading the windows
        back (nothing depends on them now)."""
        ...

    def reset_window(self, endpoint: str, window: float) -> None: ...

    def note_denial(self, endpoint: str) -> int:
        """Count a refused admission; return how many were refused in the last seconds."""
        ...

    def rate_limit_wait(self, scope: str, key: str, per_second: int, seconds: int = 1) -> float:
        """Take one request from the limit (``per_second`` requests per ``seconds``
        seconds): 0 when allowed, else seconds until it may be."""
        ...


def _bucket_size(window: float) -> float:
    return max(window / WINDOW_BUCKETS, 0.001)


class _RateLimits:
    def __init__(self, storage_url: str) -> None:
        options = {"key_prefix": KEY_PREFIX + "rate"} if storage_url.startswith("redis") else {}
        self.limiter = MovingWindowRateLimiter(storage_from_string(storage_url, **options))

    def wait(self, scope: str, key: str, per_second: int, seconds: int = 1) -> float:
        item = RateLimitItemPerSecond(per_second, multiples=seconds)
        if self.limiter.hit(item, scope, key):
            return 0.0
        reset_at = self.limiter.get_window_stats(item, scope, key).reset_time
        return max(reset_at - time.time(), 0.01)


class RedisHealthStore:
    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self._rates = _RateLimits(url)

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

    def count_outcomes(self, counts: dict[str, tuple[int, int]], window: float) -> None:
        pipe = self.client.pipeline(transaction=False)
        for endpoint, (attempts, failures) in counts.items():
            key = self._window_keys(endpoint, window)[0]
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

    def rate_limit_wait(self, scope: str, key: str, per_second: int, seconds: int = 1) -> float:
        return self._rates.wait(scope, key, per_second, seconds)


class LocalHealthStore:
    """The same counters in this process's memory: right only when one process sends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._windows: dict[str, list[tuple[float, bool]]] = defaultdict(list)
        self._denials: dict[str, list[float]] = defaultdict(list)
        self._rates = _RateLimits("memory://")

    def record_outcomes(
        self, endpoint: str, attempts: int, failures: int, window: float
    ) -> tuple[int, int]:
        now = time.monotonic()
        with self._lock:
            outcomes = [o for o in self._windows[endpoint] if o[0] > now - window]
            outcomes += [(now, n < failures) for n in range(attempts)]
            self._windows[endpoint] = outcomes
            return len(outcomes), sum(1 for _, f in outcomes if f)

    def count_outcomes(self, counts: dict[str, tuple[int, int]], window: float) -> None:
        for endpoint, (attempts, failures) in counts.items():
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

    def rate_limit_wait(self, scope: str, key: str, per_second: int, seconds: int = 1) -> float:
        return self._rates.wait(scope, key, per_second, seconds)


@lru_cache(maxsize=4)
def get_store(redis_url: str) -> HealthStore:
    """One store per process (and URL); Redis when a URL is given, else memory."""
    return RedisHealthStore(redis_url) if redis_url else LocalHealthStore()
