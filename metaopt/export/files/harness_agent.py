"""The harness's agent loop, standalone: the same loop as metaopt's task agent (task_agent/loop.py).

Ask the model, run its tool calls through the executor, append the results, repeat; stop on the
finish tool (after the harness's verification rounds), on a turn with no tool call, or at the
turn, time or context limit. Agent tools run another role as a sub-agent. Messages are plain
dicts shaped like the OpenTelemetry GenAI message schema:
`{"role": "system"|"user"|"assistant"|"tool", "parts": [...]}` with parts
`{"type": "text", "content"}`, `{"type": "tool_call", "id", "name", "arguments"}`,
`{"type": "tool_call_response", "id", "response", "is_error"?}`, `{"type": "reasoning", ...}`.

A model is any object with `generate(messages, tools, settings) -> assistant message dict`
(see models.py for the Anthropic and OpenAI SDK clients; pass your own for anything else).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .harness_runtime import Executor, run_tool

MAX_SUBAGENT_DEPTH = 2
DROPPED = "[output dropped to fit the context window]"
SUMMARIZE = ("The conversation is about to exceed the context window. Summarise your progress so far for "
             "yourself: what you found, what you changed (files, commands), what works, what is left to do, "
             "and anything you must not forget. Reply with the summary only; do not call tools.")
SUMMARY_HEADER = "[Context was full. Your own summary of the work so far:]"


class Model(Protocol):
    def generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 settings: dict[str, Any]) -> dict[str, Any]: ...


def load_harness(path: str | Path | None = None) -> dict[str, Any]:
    """The exported harness (harness.json next to this file unless `path` is given)."""
    return json.loads(Path(path or Path(__file__).with_name("harness.json")).read_text(encoding="utf-8"))


def text_of(message: dict[str, Any]) -> str:
    return "\n".join(p["content"] for p in message["parts"] if p["type"] == "text")


def tool_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"] == "tool_call"]


def _msg(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


@dataclass
class Episode:
    """outcome: finished | no_tool_call | turn_limit | time_limit | context_limit | model_error."""

    outcome: str
    messages: list[dict[str, Any]]
    turns: int = 0
    tool_calls: int = 0
    error: str | None = None
    summary: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class HarnessAgent:
    """Runs the harness with `model`; shell and python tools go to `executor`."""

    def __init__(self, model: Model, executor: Executor, harness: dict[str, Any] | None = None,
                 settings: dict[str, Any] | None = None) -> None:
        self.model, self.executor = model, executor
        self.h = harness or load_harness()
        self.settings = {**self.h.get("model", {}), **(settings or {})}

    # -- harness views ----------------------------------------------------------------------
    def tools_for(self, role: str) -> list[dict[str, Any]]:
        allowed = self.h["routing"]["roles"][role].get("tools")
        return [t for t in self.h["tools"] if allowed is None or t["name"] in allowed]

    def system_prompt(self, role: str) -> str:
        key = self.h["routing"]["roles"][role].get("prompt")
        prompts = self.h["prompts"]
        return "\n\n".join(p for p in (prompts["system"], prompts["roles"].get(key or "")) if p)

    # -- the loop ---------------------------------------------------------------------------
    def run(self, instruction: str, timeout_s: float | None = None) -> Episode:
        """Work on `instruction` until done or `timeout_s` (also bounded by the harness's
        routing.limits.max_wall_s). Model errors end the episode with outcome model_error."""
        limit = self.h["routing"]["limits"].get("max_wall_s")
        deadline = time.monotonic() + min(x for x in (timeout_s, limit, 1e9) if x is not None)
        return self._episode(self.h["routing"]["start_role"], instruction, deadline, 0)

    def _episode(self, role: str, instruction: str, deadline: float, depth: int) -> Episode:
        h = self.h
        tools = {t["name"]: t for t in self.tools_for(role)}
        specs = [{"name": t["name"], "description": t["description"], "parameters": t["parameters"]}
                 for t in tools.values()]
        max_turns = h["routing"]["roles"][role].get("max_turns") or h["routing"]["limits"]["max_turns"]
        task = h["prompts"]["task_template"].replace("{instruction}", instruction)
        messages = [_msg("system", self.system_prompt(role)), _msg("user", task)]
        ep = Episode("turn_limit", messages)
        challenges = 0
        for turn in range(max_turns):
            if time.monotonic() >= deadline:
                ep.outcome = "time_limit"
                break
            if not self._fit_context(messages):
                ep.outcome = "context_limit"
                break
            try:
                reply = self.model.generate(messages, specs, self.settings)
            except Exception as e:  # provider errors end the episode
                ep.outcome, ep.error = "model_error", f"{type(e).__name__}: {e}"
                break
            ep.turns = turn + 1
            messages.append(reply)
            calls = tool_calls(reply)
            if not calls:
                ep.outcome, ep.summary = "no_tool_call", text_of(reply)
                break
            results, finished = [], False
            for call in calls:
                ep.tool_calls += 1
                tool = tools.get(call["name"])
                if tool is not None and tool["kind"] == "finish" and not call.get("arguments_error"):
                    verify = h["routing"].get("verification")
                    if verify is not None and challenges < verify["max_rounds"]:
                        challenges += 1
                        results.append(_result(call, verify["prompt"], False))
                    else:
                        finished, ep.summary = True, str(call["arguments"].get("summary", ""))
                        results.append(_result(call, "Finished.", False))
                else:
                    results.append(_result(call, *self._call(call, tool, tools, deadline, depth)))
            messages.append({"role": "tool", "parts": results})
            if finished:
                ep.outcome = "finished"
                break
        return ep

    def _call(self, call: dict[str, Any], tool: dict[str, Any] | None, tools: dict[str, Any],
              deadline: float, depth: int) -> tuple[str, bool]:
        if call.get("arguments_error"):
            return (f"Your arguments for {call['name']} were not a JSON object ({call['arguments_error']}). "
                    "Call the tool again with valid JSON arguments."), True
        if tool is None:
            return f"Unknown tool {call['name']!r}. Available tools: {', '.join(tools)}.", True
        if tool["kind"] == "agent":
            if depth >= MAX_SUBAGENT_DEPTH:
                return "Sub-agents cannot nest deeper.", True
            task = call["arguments"].get("task") or json.dumps(call["arguments"], ensure_ascii=False)
            sub = self._episode(tool["role"], str(task), deadline, depth + 1)
            last = sub.summary or (text_of(sub.messages[-1]) if sub.messages else "")
            return f"[sub-agent {tool['role']} ended: {sub.outcome}]\n{last}", False
        return run_tool(tool, call["arguments"], self.executor, deadline)

    def _fit_context(self, messages: list[dict[str, Any]]) -> bool:
        """Keep the history under routing.context.max_tokens (characters / 4). False = give up."""
        ctx = self.h["routing"]["context"]
        budget = ctx.get("max_tokens")
        if budget is None or _tokens(messages) <= budget:
            return True
        if ctx["on_overflow"] == "stop":
            return False
        if ctx["on_overflow"] == "summarize" and self._summarize(messages) and _tokens(messages) <= budget:
            return True
        for i, m in enumerate(messages):
            if m["role"] != "tool":
                continue
            messages[i] = {"role": "tool", "parts": [{**p, "response": DROPPED} if p["type"] == "tool_call_response"
                                                     else p for p in m["parts"]]}
            if _tokens(messages) <= budget:
                return True
        return _tokens(messages) <= budget

    def _summarize(self, messages: list[dict[str, Any]]) -> bool:
        try:
            reply = self.model.generate([*messages, _msg("user", SUMMARIZE)], [], self.settings)
        except Exception:  # a failed summary is not fatal: the caller truncates instead
            return False
        summary = text_of(reply).strip()
        if not summary:
            return False
        messages[1:] = [_msg("user", f"{text_of(messages[1])}\n\n{SUMMARY_HEADER}\n{summary}")]
        return True


def _result(call: dict[str, Any], response: str, is_error: bool) -> dict[str, Any]:
    part = {"type": "tool_call_response", "id": call["id"], "response": response}
    if is_error:
        part["is_error"] = True
    return part


def _tokens(messages: list[dict[str, Any]]) -> int:
    return sum(len(json.dumps(m, ensure_ascii=False)) for m in messages) // 4
