"""Retry with exponential backoff."""

import time


class GiveUp(Exception):
    """Raised when every attempt failed; `__cause__` is the last error."""


def retry(fn, attempts=5, base_delay=0.5, max_delay=30.0, retry_on=(Exception,), sleep=time.sleep):
    """Call `fn()` until it returns, at most `attempts` times. After failure k (1-based) wait
    min(max_delay, base_delay * 2**(k-1)) seconds. Raises GiveUp after the last failure."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    for k in range(1, attempts + 1):
        try:
            return fn()
        except retry_on as exc:
            if k == attempts:
                raise GiveUp(f"gave up after {attempts} attempts") from exc
            sleep(min(max_delay, base_delay * 2 ** (k - 1)))
