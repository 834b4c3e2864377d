"""throttle: client-side rate limiting and retry helpers."""

from throttle.backoff import GiveUp, retry
from throttle.bucket import TokenBucket

__all__ = ["GiveUp", "TokenBucket", "retry"]
__version__ = "0.4.1"
