"""The meta-agent session's history kept inside its budget: at most a profile's tool calls a
reply, the oldest tool results elided to a character budget, and further, for a model that counts
tokens, until a request leaves the reply's room in its context window."""

from __future__ import annotations

import json
from typing import Any

from metaopt.task_agent.loop import request_limit
from metaopt.task_agent.messages import Message, ToolCallPart, ToolResultPart, ToolSpec
from metaopt.task_agent.models.base import CountsTokens

__all__ = ["ELIDED", "first_calls", "fit", "fit_window"]

ELIDED = "[elided to fit the context window: call the tool again if you need it]"


def first_calls(reply: Message, n: int) -> tuple[Message, int]:
    """`reply` with only its first `n` tool calls, and how many it dropped."""
    calls = reply.tool_calls
    if len(calls) <= n:
        return reply, 0
    keep = {id(c) for c in calls[:n]}
    parts = [q for q in reply.parts if not isinstance(q, ToolCallPart) or id(q) in keep]
    return Message(role=reply.role, parts=parts), len(calls) - n


def _chars(part: Any) -> int:
    if isinstance(part, ToolCallPart):
        return len(part.name) + len(json.dumps(part.arguments))
    return len(getattr(part, "response", None) or getattr(part, "content", "") or "")


def fit_window(messages: list[Message], tools: list[ToolSpec], room: int, model: object, max_chars: int
               ) -> list[Message]:
    """`fit` at a smaller character budget until the request leaves room for a `room`-token reply
    in the model's context window (task_agent.loop.request_limit, as the task agent keeps it), for
    a model that counts tokens (base.CountsTokens: the local models, 8192 tokens a slot); others
    as they are."""
    if not isinstance(model, CountsTokens) or not (limit := request_limit(None, model.context_window, room)):
        return messages
    while model.count_tokens(messages, tools) > limit and max_chars > 1000:
        max_chars = int(max_chars * 0.8)
        messages = fit(messages, max_chars)
    return messages


def fit(messages: list[Message], max_chars: int) -> list[Message]:
    """Replace the oldest tool results (never the last turn's) by ELIDED until the history fits
    (the count includes the model's own calls' arguments)."""
    total = sum(_chars(p) for m in messages for p in m.parts)
    out = list(messages)
    for i, m in enumerate(out[:-1]):
        if total <= max_chars:
            break
        if m.role != "tool":
            continue
        parts = []
        for p in m.parts:
            if isinstance(p, ToolResultPart) and len(p.response) > len(ELIDED):
                total -= len(p.response) - len(ELIDED)
                p = p.model_copy(update={"response": ELIDED})
            parts.append(p)
        out[i] = Message(role="tool", parts=parts)
    return out
