"""Errors raised by model clients, grouped by who they are for.

- User mistakes (fail fast, one clear line): `ModelConfigError` and its subclasses
  `MissingApiKey`, `UnknownProvider`.
- Safety switch: `ModelRequestsBlocked` (a real request was attempted while requests are off).
- Systemic failures: `ModelError` (the API refused, or kept failing after retries).

No message ever contains an API key.
"""

from __future__ import annotations


class ModelConfigError(ValueError):
    """A model name, base URL or setting is wrong; the message names what to fix."""


class MissingApiKey(ModelConfigError):
    """The provider's API key environment variable is not set."""

    def __init__(self, env_var: str) -> None:
        super().__init__(f"{env_var} is not set")
        self.env_var = env_var


class UnknownProvider(ModelConfigError):
    """The `provider/` prefix of a model name is not registered."""

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(
            f"unknown model provider in {name!r}; known providers: {', '.join(sorted(known))} "
            "(names are provider/model)"
        )
        self.known = sorted(known)


class ModelRequestsBlocked(RuntimeError):
    """A real model request was attempted while ALLOW_MODEL_REQUESTS is off (tests)."""


class ModelError(RuntimeError):
    """The API call failed for good: a non-retryable error, or retries ran out.

    `error_type` is low-cardinality (the provider's error type, e.g. "rate_limit_error",
    "invalid_request_error", or "connection_error" / "timeout") and fits OTel `error.type`.
    """

    def __init__(self, message: str, *, provider: str, error_type: str,
                 status_code: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.provider = provider
        self.error_type = error_type
        self.status_code = status_code
        self.attempts = attempts
