"""The harness as an inspect-ai agent: `harness_agent()` is an `@agent` for solvers, `react`
hand-offs or `inspect eval --solver`.

The loop is the exported package's own (harness_agent.py, the same loop metaopt optimized); it
runs in a worker thread and reaches inspect's model (`get_model()`, or the `model` argument) and
sandbox (`sandbox()`) on the event loop through anyio. The sample's messages are replaced by the
harness's transcript, `state.output` holds the finish summary, and the sample store's
`harness_episode` says how the episode ended (outcome, turns, tool_calls, error, summary).
"""

from __future__ import annotations

import math
import re
import secrets
from functools import partial
from typing import Any

import anyio
from inspect_ai.agent import Agent, AgentState, agent
from inspect_ai.model import (ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageTool,
                              ChatMessageUser, GenerateConfig, Model, ModelOutput, get_model)
from inspect_ai.tool import ToolCall, ToolCallError, ToolInfo, ToolParams
from inspect_ai.util import sandbox as current_sandbox
from inspect_ai.util import store

from .harness_agent import HarnessAgent, load_harness
from .harness_runtime import Result, stateful_command

HARNESS = load_harness()


@agent(name=re.sub(r"\W+", "_", HARNESS["name"]) + "_harness")
def harness_agent(model: str | Model | None = None, timeout_s: float | None = None) -> Agent:
    """The exported harness. `model`: inspect model (default: the eval's model)."""

    async def execute(state: AgentState) -> AgentState:
        bridge = InspectModel(get_model(model))
        executor = InspectExecutor(current_sandbox())
        instruction = state.messages[-1].text if state.messages else ""
        loop = HarnessAgent(bridge, executor, HARNESS)
        ep = await anyio.to_thread.run_sync(partial(loop.run, instruction, timeout_s))
        state.messages = to_inspect(ep.messages)
        # how the episode ended, for scorers and logs (the sample store is in the eval log)
        store().set("harness_episode", {"outcome": ep.outcome, "turns": ep.turns, "tool_calls": ep.tool_calls,
                                        "error": ep.error, "summary": ep.summary})
        state.output = ModelOutput.from_content(model=bridge.model.name, content=ep.summary)
        return state

    return execute


class InspectModel:
    """harness_agent's Model over an inspect Model (called from the worker thread)."""

    def __init__(self, model: Model) -> None:
        self.model = model

    def generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 settings: dict[str, Any]) -> dict[str, Any]:
        infos = [ToolInfo(name=t["name"], description=t["description"],
                          parameters=ToolParams.model_validate({"additionalProperties": None, **t["parameters"]}))
                 for t in tools]
        config = GenerateConfig(temperature=settings.get("temperature"), max_tokens=settings.get("max_tokens"),
                                reasoning_effort=settings.get("reasoning_effort"),
                                reasoning_tokens=settings.get("thinking_budget"))
        out = anyio.from_thread.run(partial(self.model.generate, to_inspect(messages), tools=infos, config=config))
        parts: list[dict[str, Any]] = []
        if out.message.text:
            parts.append({"type": "text", "content": out.message.text})
        for call in out.message.tool_calls or []:
            part = {"type": "tool_call", "id": call.id, "name": call.function,
                    "arguments": call.arguments if isinstance(call.arguments, dict) else {}}
            if call.parse_error:
                part["arguments_error"] = call.parse_error
            parts.append(part)
        return {"role": "assistant", "parts": parts}


class InspectExecutor:
    """The harness's Executor over the sample's inspect sandbox. The persistent session is
    emulated: cwd and exported variables are saved after each call and restored before the next."""

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox
        self.state = f"/tmp/.harness-session-{secrets.token_hex(6)}"

    def run(self, command: str, *, timeout: float, fresh: bool = False, user: str | None = None) -> Result:
        script = command if fresh else stateful_command(command, self.state)
        call = partial(self.sandbox.exec, ["bash", "-c", script], timeout=max(1, math.ceil(timeout)), user=user)
        try:
            r = anyio.from_thread.run(call)
        except TimeoutError:
            return Result("", "", 124, timed_out=True)
        return Result(r.stdout, r.stderr, r.returncode)


def to_inspect(messages: list[dict[str, Any]]) -> list[ChatMessage]:
    """OTel-shaped message dicts -> inspect chat messages (tool results one message each)."""
    names = {p["id"]: p["name"] for m in messages for p in m["parts"] if p["type"] == "tool_call"}
    out: list[ChatMessage] = []
    for m in messages:
        text = "\n".join(p["content"] for p in m["parts"] if p["type"] == "text")
        if m["role"] == "system":
            out.append(ChatMessageSystem(content=text))
        elif m["role"] == "user":
            out.append(ChatMessageUser(content=text))
        elif m["role"] == "assistant":
            calls = [ToolCall(id=p["id"], function=p["name"], arguments=p["arguments"])
                     for p in m["parts"] if p["type"] == "tool_call"]
            out.append(ChatMessageAssistant(content=text, tool_calls=calls or None))
        else:
            out.extend(ChatMessageTool(content=p["response"], tool_call_id=p["id"], function=names.get(p["id"]),
                                       error=ToolCallError("unknown", p["response"]) if p.get("is_error") else None)
                       for p in m["parts"] if p["type"] == "tool_call_response")
    return out
