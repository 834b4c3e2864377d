"""The base of the fake models (task_agent.models.fake, models.replay): records each call it
receives in `.calls` and adds usage (tokens estimated as characters // 4, cost 0)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class FakeCall:
    """What one generate() call received."""

    messages: list[Message]
    tools: list[ToolSpec]
    settings: ModelSettings


def _chars(part: Any) -> int:
    if isinstance(part, (TextPart, ReasoningPart)):
        return len(part.content)
    if isinstance(part, ToolCallPart):
        return len(part.name) + len(json.dumps(part.arguments))
    if isinstance(part, ToolResultPart):
        return len(part.response)
    return 0


class FakeModel:
    """Base of the fakes: subclasses implement `respond()`, this records calls and adds usage."""

    provider = "fake"
    name = "fake/base"

    def __init__(self) -> None:
        self.calls: list[FakeCall] = []
        self._ids = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, calls={len(self.calls)})"

    def generate(self, messages: list[Message], tools: list[ToolSpec],
                 settings: ModelSettings) -> ModelResponse:
        self.calls.append(FakeCall(list(messages), list(tools), settings))
        parts = self.respond(messages, tools)
        message = Message(role="assistant", parts=parts)
        finish: FinishReason = "tool_call" if message.tool_calls else "stop"
        reasoning = sum(_chars(p) for p in parts if isinstance(p, ReasoningPart)) // 4
        usage = Usage(input_tokens=sum(_chars(p) for m in messages for p in m.parts) // 4 + 1,
                      output_tokens=sum(_chars(p) for p in parts) // 4 + 1,
                      reasoning_tokens=reasoning)
        return ModelResponse(message=message, usage=usage, cost_usd=0.0, finish_reason=finish,
                             model=self.name, provider="fake",
                             response_id=f"fake-{len(self.calls)}")

    def respond(self, messages: list[Message], tools: list[ToolSpec]) -> list[Any]:
        raise NotImplementedError

    def _call(self, name: str, arguments: dict[str, Any], id: str | None = None) -> ToolCallPart:
        self._ids += 1
        return ToolCallPart(id=id or f"call_{self._ids}", name=name, arguments=arguments)
