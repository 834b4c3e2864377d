"""A thread-safe token bucket."""

import threading
import time


class TokenBucket:
    """Holds at most `capacity` tokens and gains `rate` tokens per second.

    `clock` returns seconds (monotonic); `sleep` blocks. Both are injectable for tests.
    """

    def __init__(self, rate, capacity, clock=time.monotonic, sleep=time.sleep):
        if rate <= 0 or capacity <= 0:
            raise ValueError("rate and capacity must be positive")
        self.rate = float(rate)
        self.capacity = float(capacity)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(capacity)
        self._last = clock()
        self._lock = threading.Lock()

    def _refill(self):
        now = self._clock()
        elapsed = max(0.0, now - self._last)
        self._last = now
        self._tokens = self._tokens + elapsed * self.rate

    def available(self):
        """Whole tokens that could be taken right now."""
        with self._lock:
            self._refill()
            return int(self._tokens)

    def try_acquire(self, n=1):
        """Take `n` tokens if they are available now; return whether it did."""
        if n > self.capacity:
            raise ValueError(f"cannot take {n} tokens from a bucket of {self.capacity:g}")
        with self._lock:
            self._refill()
            if self._tokens >= n:
                self._tokens -= n
                return True
            return False

    def acquire(self, n=1, timeout=None):
        """Block until `n` tokens are taken; with `timeout`, give up after that many seconds
        and return False."""
        deadline = None if timeout is None else self._clock() + timeout
        while True:
            with self._lock:
                self._refill()
                if self._tokens >= n:
                    self._tokens -= n
                    return True
                wait = (n - self._tokens) / self.rate
            if deadline is not None:
                left = deadline - self._clock()
                if left <= 0:
                    return False
                wait = min(wait, left)
            self._sleep(wait)
