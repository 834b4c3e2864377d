"""OpenAI Chat Completions client: `openai/<model>` and `openai-compatible/<model>` (vLLM,
ollama, llama.cpp server, ...), non-streaming.

Contracts:
- Tool arguments that are not a JSON object never raise: the call gets `arguments={}` and
  `arguments_error` with the reason and the raw text, so the loop can tell the model.
- Reasoning text from servers that return it (`reasoning_content`, vLLM/deepseek; `reasoning`,
  ollama/newer vLLM) becomes a ReasoningPart; it is not sent back (Chat Completions has no field
  for it and some servers reject it).
- The key comes from OPENAI_API_KEY; compatible servers get "sk-no-key" when it is unset. It never
  appears in errors, reprs or logs.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import openai

from metaopt.core.errors import MissingApiKey, ModelConfigError
from metaopt.task_agent.messages import (
    FinishReason,
    Message,
    ModelResponse,
    ModelSettings,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from metaopt.task_agent.models.base import check_model_requests_allowed, server_of
from metaopt.task_agent.models.pricing import cost_usd
from metaopt.task_agent.models.retry import RetryPolicy, call_with_retries, classify_sdk_error

ENV_KEY = "OPENAI_API_KEY"
ENV_BASE_URL = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
NO_KEY = "sk-no-key"  # local servers ignore the key, but the SDK insists on one
FINISH: dict[str, FinishReason] = {
    "stop": "stop", "tool_calls": "tool_call", "function_call": "tool_call", "length": "length",
    "content_filter": "content_filter",
}


class OpenAIModel:
    """Chat Completions through the official SDK with its own retries off (ours apply).

    `compatible=True` serves `openai-compatible/`: base_url is required (argument or
    OPENAI_BASE_URL), the key is optional, and the output limit is sent as `max_tokens`, which
    every compatible server knows, instead of `max_completion_tokens`.
    """

    provider = "openai"

    def __init__(self, model: str, *, base_url: str | None = None, compatible: bool = False,
                 retry: RetryPolicy | None = None, timeout_s: float = 600.0) -> None:
        key = os.environ.get(ENV_KEY)
        if compatible:
            base_url = base_url or os.environ.get(ENV_BASE_URL)
            if not base_url:
                raise ModelConfigError(
                    f"openai-compatible/{model} needs a server: pass --base-url or set {ENV_BASE_URL}")
            key = key or NO_KEY
        elif not key:
            raise MissingApiKey(ENV_KEY)
        self.model = model
        self.compatible = compatible
        self.name = f"{'openai-compatible' if compatible else 'openai'}/{model}"
        self.base_url = base_url or os.environ.get(ENV_BASE_URL) or DEFAULT_BASE_URL
        self.retry = retry or RetryPolicy()
        self._secrets = (key,) if key != NO_KEY else ()
        self._client = openai.OpenAI(api_key=key, base_url=self.base_url, max_retries=0,
                                     timeout=timeout_s)

    def __repr__(self) -> str:  # the SDK client holds the key: never show it
        return f"OpenAIModel(name={self.name!r}, base_url={self.base_url!r})"

    def generate(self, messages: list[Message], tools: list[ToolSpec],
                 settings: ModelSettings) -> ModelResponse:
        check_model_requests_allowed(self.name)
        request = build_request(self.model, messages, tools, settings, compatible=self.compatible)
        deadline = None if settings.timeout_s is None else time.monotonic() + settings.timeout_s

        def create() -> Any:
            if deadline is None:
                return self._client.chat.completions.create(**request)
            # the SDK's per-request timeout: each attempt gets what is left of settings.timeout_s
            return self._client.chat.completions.create(**request, timeout=max(0.1, deadline - time.monotonic()))

        raw = call_with_retries(create, policy=self.retry, provider=self.provider, name=self.name,
                                classify=_classify, secrets=self._secrets, deadline=deadline)
        address, port = server_of(self.base_url)
        return parse_response(raw, address, port)


def _classify(exc: BaseException):
    return classify_sdk_error(exc, status_error=openai.APIStatusError,
                              connection_error=openai.APIConnectionError,
                              timeout_error=openai.APITimeoutError)


def build_request(model: str, messages: list[Message], tools: list[ToolSpec],
                  settings: ModelSettings, *, compatible: bool = False) -> dict[str, Any]:
    """Keyword arguments for `client.chat.completions.create`."""
    request: dict[str, Any] = {"model": model, "messages": _messages(messages)}
    request["max_tokens" if compatible else "max_completion_tokens"] = settings.max_tokens
    if tools:
        request["tools"] = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in tools]
    if settings.temperature is not None:
        request["temperature"] = settings.temperature
    if settings.reasoning_effort is not None:
        request["reasoning_effort"] = settings.reasoning_effort
    return request


def _messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        text = message.text
        results = [p for p in message.parts if isinstance(p, ToolResultPart)]
        # Tool results are their own role-"tool" messages, whatever message carried them.
        out.extend({"role": "tool", "tool_call_id": r.id, "content": r.response} for r in results)
        if message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls := message.tool_calls:
                # Unparsable arguments are replayed as "{}": some servers re-parse history.
                entry["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                    "name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                    for c in calls]
            out.append(entry)
        elif message.role in ("system", "user") and text:
            out.append({"role": message.role, "content": text})
    return out


def parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """(arguments, error): never raises. Empty text means no arguments."""
    if raw is None or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"invalid JSON in tool arguments ({exc.msg} at char {exc.pos}): {raw}"
    if not isinstance(value, dict):
        return {}, f"tool arguments must be a JSON object, got {type(value).__name__}: {raw}"
    return value, None


def parse_response(raw: Any, address: str | None, port: int | None) -> ModelResponse:
    """An SDK `ChatCompletion` -> ModelResponse (first choice only)."""
    choice = raw.choices[0]
    msg = choice.message
    parts: list[Any] = []
    extra = msg.model_extra or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append(ReasoningPart(content=reasoning))
    if msg.content:
        parts.append(TextPart(content=msg.content))
    elif msg.refusal:
        parts.append(TextPart(content=msg.refusal))
    for call in msg.tool_calls or []:
        function = getattr(call, "function", None)
        if function is None:  # custom (non-function) tools are never offered by us
            continue
        arguments, error = parse_arguments(function.arguments)
        parts.append(ToolCallPart(id=call.id, name=function.name, arguments=arguments,
                                  arguments_error=error))
    finish = FINISH.get(choice.finish_reason or "")
    if finish is None or (finish == "stop" and msg.tool_calls):
        # Some compatible servers say "stop" (or nothing) even when they call tools.
        finish = "tool_call" if msg.tool_calls else "stop"
    return ModelResponse(
        message=Message(role="assistant", parts=parts), usage=_usage(raw.usage),
        cost_usd=cost_usd(raw.model, _usage(raw.usage)), finish_reason=finish, model=raw.model,
        provider="openai", response_id=raw.id, server_address=address, server_port=port)


def _usage(u: Any) -> Usage:
    if u is None:
        return Usage()
    prompt = getattr(u, "prompt_tokens_details", None)
    completion = getattr(u, "completion_tokens_details", None)
    return Usage(input_tokens=u.prompt_tokens or 0, output_tokens=u.completion_tokens or 0,
                 cache_read_tokens=getattr(prompt, "cached_tokens", None) or 0,
                 reasoning_tokens=getattr(completion, "reasoning_tokens", None) or 0)


def create(model: str, *, base_url: str | None = None,
           context: dict[str, Any] | None = None) -> OpenAIModel:
    """Registry factory for `openai/<model>`; context may carry a RetryPolicy as "retry"."""
    return OpenAIModel(model, base_url=base_url, retry=(context or {}).get("retry"))


def create_compatible(model: str, *, base_url: str | None = None,
                      context: dict[str, Any] | None = None) -> OpenAIModel:
    """Registry factory for `openai-compatible/<model>`."""
    return OpenAIModel(model, base_url=base_url, compatible=True,
                       retry=(context or {}).get("retry"))
