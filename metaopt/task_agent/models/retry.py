"""Retries with exponential backoff and jitter for model API calls.

Retried: HTTP 408, 409, 429 and 5xx (Anthropic's 529 overloaded_error included), connection
errors and timeouts. A `retry-after` / `retry-after-ms` header sets the wait, capped. Anything
else the SDK raises becomes a ModelError at once. Non-SDK exceptions (our bugs) pass through.

The SDK exception is never chained into the ModelError: it holds the request, whose headers carry
the API key, and chained exceptions end up in logs and tracebacks.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from metaopt.core.errors import ModelError

T = TypeVar("T")
RETRYABLE_STATUS = {408, 409, 429}


@dataclass(frozen=True)
class Failure:
    """An SDK error, classified."""

    retryable: bool
    error_type: str
    message: str
    status_code: int | None = None
    retry_after: float | None = None


@dataclass
class RetryPolicy:
    """How hard to try. `sleep` and `rng` are injectable so tests run instantly and repeatably."""

    max_attempts: int = 6
    base_delay: float = 1.0
    max_delay: float = 60.0
    max_retry_after: float = 120.0
    sleep: Callable[[float], Any] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int, failure: Failure) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        if failure.retry_after is not None:
            return min(max(failure.retry_after, 0.0), self.max_retry_after)
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        # Half fixed, half random: spreads out clients that failed together, never waits ~0.
        return ceiling / 2 + self.rng.uniform(0, ceiling / 2)


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds or an HTTP date); None if absent."""
    if headers is None:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return float(ms) / 1000
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return float(value)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def classify_sdk_error(exc: BaseException, *, status_error: type, connection_error: type,
                       timeout_error: type) -> Failure | None:
    """Classify an exception from an anthropic/openai SDK (both share this shape); None when it
    is not an API error."""
    if isinstance(exc, timeout_error):
        return Failure(True, "timeout", "request timed out")
    if isinstance(exc, connection_error):
        return Failure(True, "connection_error", "connection error")
    if not isinstance(exc, status_error):
        return None
    status = int(getattr(exc, "status_code", 0) or 0)
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    error_type = getattr(exc, "type", None) or error.get("type") or f"http_{status}"
    detail = error.get("message") or getattr(exc, "api_message", None) or ""
    response = getattr(exc, "response", None)
    return Failure(
        retryable=status in RETRYABLE_STATUS or status >= 500,
        error_type=str(error_type),
        message=f"HTTP {status} {error_type}: {detail}".strip().rstrip(":"),
        status_code=status,
        retry_after=parse_retry_after(getattr(response, "headers", None)),
    )


def call_with_retries(fn: Callable[[], T], *, policy: RetryPolicy, provider: str, name: str,
                      classify: Callable[[BaseException], Failure | None],
                      secrets: tuple[str, ...] = (), deadline: float | None = None) -> T:
    """Call `fn` until it succeeds, retrying what `classify` calls retryable.

    Raises ModelError (one line, secrets masked) on a non-retryable error, when
    `policy.max_attempts` attempts have failed, or when the wait before the next attempt would
    pass `deadline` (time.monotonic()).
    """
    attempt = 0
    while True:
        attempt += 1
        failure: Failure | None = None
        try:
            return fn()
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
        # Outside the except block, so the SDK exception is not attached as __context__.
        wait = policy.delay(attempt, failure) if failure.retryable else 0.0
        if failure.retryable and attempt < policy.max_attempts and (
                deadline is None or time.monotonic() + wait < deadline):
            policy.sleep(wait)
            continue
        tail = f" after {attempt} attempts" if attempt > 1 else ""
        message = f"{name}: {failure.message}{tail}".replace("\n", " ")[:500]
        for secret in secrets:
            if secret:
                message = message.replace(secret, "***")
        raise ModelError(message, provider=provider, error_type=failure.error_type,
                         status_code=failure.status_code, attempts=attempt)
