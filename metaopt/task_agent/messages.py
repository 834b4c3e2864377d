"""Provider-neutral messages, shaped like the OpenTelemetry GenAI message schema.

A `Message` dumps straight into `gen_ai.input.messages` / `gen_ai.output.messages` with
`to_otel()`, and loads back with `Message.from_otel()`. Every model client converts from and to
these types; nothing provider-specific leaks past `task_agent/models/`.

All types are frozen pydantic models: a history can be shared between turns and traces without
anyone editing it in place.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "tool_call", "length", "content_filter", "error"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Frozen):
    """Plain text."""

    type: Literal["text"] = "text"
    content: str

    def to_otel(self) -> dict[str, Any]:
        return {"type": "text", "content": self.content}


class ReasoningPart(_Frozen):
    """Model reasoning. `signature` (Anthropic thinking) and `data` (redacted_thinking, with
    `redacted=True`) are opaque and must be sent back to the provider unchanged."""

    type: Literal["reasoning"] = "reasoning"
    content: str
    signature: str | None = None
    redacted: bool = False
    data: str | None = None

    def to_otel(self) -> dict[str, Any]:
        # The GenAI schema allows extra keys on parts; it defines none for signatures.
        out: dict[str, Any] = {"type": "reasoning", "content": self.content}
        if self.signature is not None:
            out["signature"] = self.signature
        if self.redacted:
            out["redacted"] = True
        if self.data is not None:
            out["data"] = self.data
        return out


class ToolCallPart(_Frozen):
    """A tool call requested by the model. When the model sent arguments that are not a JSON
    object, `arguments` is `{}` and `arguments_error` says why and holds the raw text."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    arguments_error: str | None = None

    def to_otel(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "tool_call", "id": self.id, "name": self.name, "arguments": self.arguments,
        }
        if self.arguments_error is not None:
            out["arguments_error"] = self.arguments_error
        return out


class ToolResultPart(_Frozen):
    """The result of tool call `id`, as text for the model."""

    type: Literal["tool_call_response"] = "tool_call_response"
    id: str
    response: str
    is_error: bool = False

    def to_otel(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "tool_call_response", "id": self.id, "response": self.response}
        if self.is_error:
            out["is_error"] = True
        return out


Part = Annotated[TextPart | ReasoningPart | ToolCallPart | ToolResultPart, Field(discriminator="type")]


class Message(_Frozen):
    """One turn. Tool results travel in `role="tool"` messages (one or more ToolResultParts)."""

    role: Role
    parts: list[Part]

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", parts=[TextPart(content=text)])

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", parts=[TextPart(content=text)])

    @classmethod
    def from_otel(cls, data: dict[str, Any]) -> Message:
        """Inverse of `to_otel()`; `finish_reason` (output messages) is ignored."""
        return cls.model_validate({"role": data["role"], "parts": data["parts"]})

    @property
    def text(self) -> str:
        """All text parts joined by newlines (reasoning excluded)."""
        return "\n".join(p.content for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    def to_otel(self, finish_reason: FinishReason | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "parts": [p.to_otel() for p in self.parts]}
        if finish_reason is not None:
            out["finish_reason"] = finish_reason
        return out


class ToolSpec(_Frozen):
    """A tool offered to the model: `parameters` is a JSON schema for its arguments object."""

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_otel(self) -> dict[str, Any]:
        return {"type": "function", "name": self.name, "description": self.description,
                "parameters": self.parameters}


class ModelSettings(_Frozen):
    """Knobs for one generate() call. Providers ignore knobs they do not have."""

    model: str
    """Full model name, `provider/model`."""
    temperature: float | None = None
    """None: the provider's default. Dropped for Anthropic when thinking is on (the API demands it)."""
    reasoning_effort: Literal["low", "medium", "high"] | None = None
    """OpenAI reasoning_effort; for Anthropic, turns thinking on with a budget picked from the effort."""
    max_tokens: int = 4096
    """Output token limit (OpenAI: max_completion_tokens)."""
    thinking_budget: int | None = None
    """Anthropic thinking budget_tokens; takes precedence over reasoning_effort."""
    timeout_s: float | None = None
    """Longest this call may take (the loop passes the episode's remaining time); None = the
    client's own timeout. Honoured by the OpenAI-compatible clients, local/ included."""


class Usage(_Frozen):
    """Token counts, OTel style: `input_tokens` includes cached tokens (read and written);
    `output_tokens` includes `reasoning_tokens`."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in Usage.model_fields})


class ModelResponse(_Frozen):
    """What generate() returns. `cost_usd` is None when the price is unknown (never a guessed 0)."""

    message: Message
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    finish_reason: FinishReason = "stop"
    model: str
    """The model that answered, as the provider reports it (gen_ai.response.model)."""
    provider: str
    """gen_ai.provider.name."""
    response_id: str | None = None
    server_address: str | None = None
    server_port: int | None = None
    unparsed_output: str | None = None
    """What the server returned raw when it did not turn a tool call into `tool_calls` (a call
    written in the text, or arguments that are not a JSON object); None when every call parsed.
    Recorded on the chat span as `metaopt.response.unparsed_output`."""


class Transcript(_Frozen):
    """What an agent said and did in one episode, for scorers that read it (inspect tasks)."""

    messages: list[Message] = Field(default_factory=list)
    """The whole conversation, system prompt first."""
    answer: str = ""
    """The agent's final answer: the finish summary, else empty."""
    outcome: str = ""
    """How the episode ended: finished | no_tool_call | turn_limit | time_limit | ..."""

    @property
    def final_text(self) -> str:
        """The answer, or (an episode cut off by a limit) the last assistant text."""
        return self.answer or next((m.text for m in reversed(self.messages)
                                    if m.role == "assistant" and m.text), "")
