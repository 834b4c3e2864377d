"""ATIF 1.x trajectories (Harbor's `agent/trajectory.json`) replayed into the store as spans.

The replay goes through the same wrappers a live episode uses (traces.instrument): an
`invoke_agent` span, a `chat` span per agent step (a model that answers with the recorded step),
an `execute_tool` span per tool call with its observation as the result. So the explorer, the
failure grouping and the meta-agent's tools read an imported trial exactly like a native one.
Span times are the import's, not the original run's (the step timestamps stay in the messages).

Read as plain JSON (no dependency on the `atif` package): `schema_version` "ATIF-v1.x",
`agent {name, version, model_name, tool_definitions}`, `steps [{source: system|user|agent,
message, reasoning_content, tool_calls [{tool_call_id, function_name, arguments}], observation
{results [{source_call_id, content}]}, metrics {prompt_tokens, completion_tokens, cached_tokens,
cost_usd}}]`, `final_metrics`.
"""

from __future__ import annotations

import json
from typing import Any

from metaopt.task_agent.messages import (
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
from metaopt.traces.instrument import tool_span
from metaopt.traces.tracing import Tracing


def _text(content: Any) -> str:
    """A step message or observation content: a string, or ATIF 1.6+ content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content)


def _tools(agent: dict[str, Any]) -> list[ToolSpec]:
    out = []
    for d in agent.get("tool_definitions") or []:
        f = d.get("function", d) if isinstance(d, dict) else {}
        if isinstance(f, dict) and f.get("name"):
            out.append(ToolSpec(name=str(f["name"]), description=str(f.get("description") or ""),
                                parameters=f.get("parameters") or {"type": "object", "properties": {}}))
    return out


class _Replay:
    """A Model that answers each generate() with the next recorded agent step."""

    def __init__(self, name: str, provider: str):
        self.name, self.provider = name, provider
        self.next: ModelResponse | None = None

    def generate(self, messages: list[Message], tools: list[ToolSpec], settings: ModelSettings) -> ModelResponse:
        assert self.next is not None
        return self.next


def usage_of(step: dict[str, Any]) -> Usage:
    m = step.get("metrics") or {}
    return Usage(input_tokens=int(m.get("prompt_tokens") or 0), output_tokens=int(m.get("completion_tokens") or 0),
                 cache_read_tokens=int(m.get("cached_tokens") or 0))


def replay(tracing: Tracing, trajectory: dict[str, Any], *, run_id: str, trial_id: str, task_id: str,
           outcome: str, error: str | None = None) -> str:
    """Write one ATIF trajectory as an episode's spans and messages; returns its trace id."""
    agent = trajectory.get("agent") or {}
    model_name = str(agent.get("model_name") or "unknown")
    provider = model_name.split("/", 1)[0] if "/" in model_name else "harbor"
    replay_model = _Replay(model_name, provider)
    model, _ = tracing.wrap(replay_model)
    tools = _tools(agent)
    history: list[Message] = []
    total, cost = Usage(), None
    with tracing.episode(agent_name=str(agent.get("name") or "harbor-agent"),
                         harness_version=str(agent.get("version") or "") or None,
                         conversation_id=str(trajectory.get("session_id") or trial_id), run_id=run_id,
                         trial_id=trial_id, task_id=task_id, provider=provider) as episode:
        for step in trajectory.get("steps") or []:
            source, text = step.get("source"), _text(step.get("message"))
            if source == "system":
                history.append(Message.system(text))
                continue
            if source != "agent":
                history.append(Message.user(text))
                continue
            calls = [ToolCallPart(id=str(c.get("tool_call_id")), name=str(c.get("function_name")),
                                  arguments=c.get("arguments") if isinstance(c.get("arguments"), dict) else {})
                     for c in step.get("tool_calls") or []]
            parts: list[Any] = []
            if step.get("reasoning_content"):
                parts.append(ReasoningPart(content=str(step["reasoning_content"])))
            if text:
                parts.append(TextPart(content=text))
            reply = Message(role="assistant", parts=[*parts, *calls])
            usage = usage_of(step)
            step_cost = (step.get("metrics") or {}).get("cost_usd")
            replay_model.next = ModelResponse(message=reply, usage=usage, cost_usd=step_cost,
                                              finish_reason="tool_call" if calls else "stop",
                                              model=str(step.get("model_name") or model_name), provider=provider)
            model.generate(history, tools, ModelSettings(model=str(step.get("model_name") or model_name)))
            history.append(reply)
            total = total + usage
            if step_cost is not None:
                cost = (cost or 0.0) + float(step_cost)
            results = {str(r.get("source_call_id")): _text(r.get("content"))
                       for r in (step.get("observation") or {}).get("results") or []}
            for call in calls:
                result = results.get(call.id, "")
                with tool_span(tracing.tracer, call.name, call.id, call.arguments) as span:
                    span.set_result(result)
                history.append(Message(role="tool", parts=[ToolResultPart(id=call.id, response=result)]))
        final = trajectory.get("final_metrics") or {}
        if final.get("total_cost_usd") is not None:
            cost = float(final["total_cost_usd"])
        episode.finish(total, outcome, error=error, cost_usd=cost)
        return episode.trace_id
