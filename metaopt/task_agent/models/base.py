"""The Model protocol and the switch that keeps real model requests out of tests.

Every client that talks to a real API calls `check_model_requests_allowed()` before it sends
anything. Requests are off when the module flag `ALLOW_MODEL_REQUESTS` is False or when the
environment has `METAOPT_ALLOW_MODEL_REQUESTS=0` (read at call time, so a conftest that sets it
after import still wins). Tests that talk to a local stand-in server opt in with
`with allow_model_requests(): ...`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

from metaopt.core.errors import ModelRequestsBlocked
from metaopt.task_agent.messages import Message, ModelResponse, ModelSettings, ToolSpec

ALLOW_MODEL_REQUESTS: bool = True
"""Set to False to block every real model request in this process."""

CONTEXT_OVERFLOW = "exceed_context_size_error"
"""ModelError.error_type of a request the model's context window cannot hold (llama.cpp's name; a
provider that can tell this case maps its own to it). The conversation outgrew the window: the
loop ends the episode as the agent's failure (outcome context_limit), not as a model error."""

ENV_SWITCH = "METAOPT_ALLOW_MODEL_REQUESTS"
_OFF_VALUES = {"0", "false", "no", "off"}
_override: bool | None = None  # set only inside allow_model_requests()


@runtime_checkable
class Model(Protocol):
    """A chat model. `name` is `provider/model`; `provider` is the OTel gen_ai.provider.name."""

    name: str
    provider: str

    def generate(self, messages: list[Message], tools: list[ToolSpec],
                 settings: ModelSettings) -> ModelResponse:
        """One model call. Retries transient failures itself; raises ModelError when the call
        fails for good and ModelRequestsBlocked when requests are switched off."""
        ...


@runtime_checkable
class CountsTokens(Protocol):
    """Optional, beside Model: a model that counts a request as its server does and knows its
    context window. The loop then keeps each request inside the window; models without it are
    budgeted at characters / 4 and have no window."""

    context_window: int | None
    """Tokens one request may hold, prompt and reply together; None = unknown."""

    def count_tokens(self, messages: list[Message], tools: list[ToolSpec]) -> int:
        """Prompt tokens of a request with these messages and tools, chat template included.
        Raises ModelError when it cannot count."""
        ...


def model_requests_allowed() -> bool:
    if _override is not None:
        return _override
    return ALLOW_MODEL_REQUESTS and os.environ.get(ENV_SWITCH, "1").strip().lower() not in _OFF_VALUES


def check_model_requests_allowed(name: str) -> None:
    """Raise ModelRequestsBlocked unless real requests are allowed. Call before any HTTP."""
    if not model_requests_allowed():
        raise ModelRequestsBlocked(
            f"model request to {name} blocked: ALLOW_MODEL_REQUESTS is off "
            f"(tests: use allow_model_requests() around calls to a local server)"
        )


@contextlib.contextmanager
def allow_model_requests(allow: bool = True) -> Iterator[None]:
    """Temporarily force requests on (or off), whatever the flag and the environment say.
    Process-wide, not thread-local: meant for tests."""
    global _override
    previous, _override = _override, allow
    try:
        yield
    finally:
        _override = previous


def server_of(base_url: str) -> tuple[str | None, int | None]:
    """(server.address, server.port) of a base URL, the port defaulted from the scheme."""
    parts = urlsplit(base_url)
    port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    return parts.hostname, port
