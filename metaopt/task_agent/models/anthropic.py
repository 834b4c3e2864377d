"""Anthropic Messages API client (`anthropic/<model>`), non-streaming.

Contracts:
- System messages become the top-level `system` list; the last system block and the last tool
  carry `cache_control: ephemeral`, so the stable prefix (tools + system) is cached.
- Tool results (role "tool") go in user turns; consecutive user-side turns are merged, tool
  results first, as the API requires.
- Thinking is on when `thinking_budget` or `reasoning_effort` is set; temperature is then
  omitted (the API rejects it). Thinking blocks are replayed with their signature and
  redacted_thinking blocks with their data, unchanged, as the API requires during tool use.
- The key comes from ANTHROPIC_API_KEY only and never appears in errors, reprs or logs.
"""

from __future__ import annotations

import os
from typing import Any

import anthropic

from metaopt.core.errors import MissingApiKey
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

ENV_KEY = "ANTHROPIC_API_KEY"
DEFAULT_BASE_URL = "https://api.anthropic.com"
CACHE = {"type": "ephemeral"}
# Budgets for reasoning_effort, in tokens; the API's minimum is 1024.
EFFORT_BUDGET = {"low": 2048, "medium": 8192, "high": 24576}
FINISH: dict[str, FinishReason] = {
    "end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "tool_use": "tool_call",
    "max_tokens": "length", "model_context_window_exceeded": "length", "refusal": "content_filter",
}


class AnthropicModel:
    """`anthropic/<model>` through the official SDK with its own retries off (ours apply)."""

    provider = "anthropic"

    def __init__(self, model: str, *, base_url: str | None = None,
                 retry: RetryPolicy | None = None, timeout_s: float = 600.0) -> None:
        key = os.environ.get(ENV_KEY)
        if not key:
            raise MissingApiKey(ENV_KEY)
        self.model = model
        self.name = f"anthropic/{model}"
        self.base_url = base_url or DEFAULT_BASE_URL
        self.retry = retry or RetryPolicy()
        self._secrets = (key,)
        self._client = anthropic.Anthropic(api_key=key, base_url=self.base_url, max_retries=0,
                                           timeout=timeout_s)

    def __repr__(self) -> str:  # the SDK client holds the key: never show it
        return f"AnthropicModel(name={self.name!r}, base_url={self.base_url!r})"

    def generate(self, messages: list[Message], tools: list[ToolSpec],
                 settings: ModelSettings) -> ModelResponse:
        check_model_requests_allowed(self.name)
        request = build_request(self.model, messages, tools, settings)
        raw = call_with_retries(
            lambda: self._client.messages.create(**request), policy=self.retry,
            provider=self.provider, name=self.name, classify=_classify, secrets=self._secrets)
        address, port = server_of(self.base_url)
        return parse_response(raw, address, port)


def _classify(exc: BaseException):
    return classify_sdk_error(exc, status_error=anthropic.APIStatusError,
                              connection_error=anthropic.APIConnectionError,
                              timeout_error=anthropic.APITimeoutError)


def build_request(model: str, messages: list[Message], tools: list[ToolSpec],
                  settings: ModelSettings) -> dict[str, Any]:
    """Keyword arguments for `client.messages.create` (temperature rides in `extra_body`)."""
    system: list[dict[str, Any]] = [{"type": "text", "text": p.content} for m in messages if m.role == "system"
              for p in m.parts if isinstance(p, TextPart) and p.content]
    request: dict[str, Any] = {"model": model, "max_tokens": settings.max_tokens,
                               "messages": _turns(messages)}
    if system:
        system[-1]["cache_control"] = CACHE
        request["system"] = system
    if tools:
        request["tools"] = [{"name": t.name, "description": t.description,
                             "input_schema": t.parameters} for t in tools]
        request["tools"][-1]["cache_control"] = CACHE
    budget = settings.thinking_budget or EFFORT_BUDGET.get(settings.reasoning_effort or "")
    if budget:
        request["thinking"] = {"type": "enabled", "budget_tokens": budget}
        # max_tokens counts thinking too and must exceed the budget.
        request["max_tokens"] = max(settings.max_tokens, budget + 1024)
    elif settings.temperature is not None:
        # anthropic SDK 2.x dropped the temperature argument; the API still takes the field.
        request["extra_body"] = {"temperature": settings.temperature}
    return request


def _turns(messages: list[Message]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = [b for p in message.parts if (b := _block(p)) is not None]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:  # tool_result blocks must lead a user turn
        if turn["role"] == "user":
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    return turns


def _block(part: Any) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.content} if part.content else None  # API rejects ""
    if isinstance(part, ReasoningPart):
        if part.redacted and part.data is not None:
            return {"type": "redacted_thinking", "data": part.data}
        if part.signature is not None:
            return {"type": "thinking", "thinking": part.content, "signature": part.signature}
        return None  # unsigned reasoning (another provider's) cannot be replayed
    if isinstance(part, ToolCallPart):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments}
    if isinstance(part, ToolResultPart):
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.id,
                                 "content": part.response}
        if part.is_error:
            block["is_error"] = True
        return block
    raise TypeError(f"unsupported message part {type(part).__name__}")


def parse_response(raw: Any, address: str | None, port: int | None) -> ModelResponse:
    """An SDK `Message` -> ModelResponse (usage in OTel terms, cost from the price table)."""
    parts: list[Any] = []
    for block in raw.content:
        if block.type == "thinking":
            parts.append(ReasoningPart(content=block.thinking, signature=block.signature))
        elif block.type == "redacted_thinking":
            parts.append(ReasoningPart(content="", redacted=True, data=block.data))
        elif block.type == "text":
            parts.append(TextPart(content=block.text))
        elif block.type == "tool_use":
            arguments = block.input if isinstance(block.input, dict) else {}
            error = None if isinstance(block.input, dict) else f"tool input is not an object: {block.input!r}"
            parts.append(ToolCallPart(id=block.id, name=block.name, arguments=arguments,
                                      arguments_error=error))
        # Server-side tool blocks are not used by our harnesses; they are dropped.
    u = raw.usage
    cache_read = u.cache_read_input_tokens or 0
    cache_write = u.cache_creation_input_tokens or 0
    details = getattr(u, "output_tokens_details", None)
    usage = Usage(input_tokens=u.input_tokens + cache_read + cache_write,
                  output_tokens=u.output_tokens, cache_read_tokens=cache_read,
                  cache_write_tokens=cache_write,
                  reasoning_tokens=getattr(details, "thinking_tokens", None) or 0)
    return ModelResponse(
        message=Message(role="assistant", parts=parts), usage=usage,
        cost_usd=cost_usd(raw.model, usage),
        finish_reason=FINISH.get(raw.stop_reason or "", "stop"), model=raw.model,
        provider="anthropic", response_id=raw.id, server_address=address, server_port=port)


def create(model: str, *, base_url: str | None = None,
           context: dict[str, Any] | None = None) -> AnthropicModel:
    """Registry factory for `anthropic/<model>`; context may carry a RetryPolicy as "retry"."""
    return AnthropicModel(model, base_url=base_url, retry=(context or {}).get("retry"))
