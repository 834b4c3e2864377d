"""The harness on the OpenAI Agents SDK: `build_agent(executor)` and `run(instruction, executor)`.

One `Agent` per role: its instructions are the role's system prompt, its tools the role's tools
as `FunctionTool`s. Shell and python tools run through the executor (harness_runtime.py, the
same rendering, argument checks and truncation as metaopt's task agent); the finish tool answers
with the verification prompt for the harness's verification rounds, then ends the run; agent
tools run their role as a sub-agent with its own turn limit. What the SDK cannot express is
listed in README.md.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from agents import Agent, FunctionTool, ModelSettings, RunConfig, Runner, ToolsToFinalOutputResult
from agents.exceptions import MaxTurnsExceeded

from .harness_agent import MAX_SUBAGENT_DEPTH, HarnessAgent, load_harness
from .harness_runtime import Executor, run_tool

HARNESS = load_harness()


@dataclass
class _RunState:
    challenges: int = 0
    finished: bool = False
    summary: str = ""
    deadline: float | None = None


@dataclass
class Outcome:
    """outcome: finished | no_tool_call | turn_limit; result: the SDK RunResult (None at turn_limit)."""

    outcome: str
    summary: str
    result: Any = None


def model_settings() -> ModelSettings:
    m = HARNESS.get("model", {})
    kwargs: dict[str, Any] = {"temperature": m.get("temperature"), "max_tokens": m.get("max_tokens")}
    if m.get("reasoning_effort"):
        from openai.types.shared import Reasoning

        kwargs["reasoning"] = Reasoning(effort=m["reasoning_effort"])
    return ModelSettings(**kwargs)


def default_model() -> str:
    name = HARNESS.get("model", {}).get("model") or "openai/gpt-5"
    return name.split("/", 1)[1] if name.startswith(("openai/", "openai-compatible/")) else name


def build_agent(executor: Executor, model: Any = None, role: str | None = None, *,
                _state: _RunState | None = None, _depth: int = 0) -> Agent:
    """The Agent for `role` (default: the start role). `model`: an SDK Model or model name
    (default: the harness's model, else gpt-5)."""
    role = role or HARNESS["routing"]["start_role"]
    view = HarnessAgent(None, executor, HARNESS)  # prompts and tool lists, as the harness loop sees them
    state = _state or _RunState()
    tools = [_tool(t, executor, model, state, _depth) for t in view.tools_for(role)]

    def stop_on_finish(ctx: Any, results: list[Any]) -> ToolsToFinalOutputResult:
        return ToolsToFinalOutputResult(is_final_output=state.finished,
                                        final_output=state.summary if state.finished else None)

    agent = Agent(name=role, instructions=view.system_prompt(role), tools=tools,
                  model=model or default_model(), model_settings=model_settings(),
                  tool_use_behavior=stop_on_finish)
    agent._harness_state = state  # read back by run()
    return agent


def max_turns(role: str) -> int:
    return HARNESS["routing"]["roles"][role].get("max_turns") or HARNESS["routing"]["limits"]["max_turns"]


async def run_async(instruction: str, executor: Executor, model: Any = None, role: str | None = None,
                    run_config: RunConfig | None = None, _depth: int = 0, _deadline: float | None = None) -> Outcome:
    role = role or HARNESS["routing"]["start_role"]
    agent = build_agent(executor, model, role, _state=_RunState(deadline=_deadline), _depth=_depth)
    task = HARNESS["prompts"]["task_template"].replace("{instruction}", instruction)
    try:
        result = await Runner.run(agent, task, max_turns=max_turns(role), run_config=run_config)
    except MaxTurnsExceeded:
        return Outcome("turn_limit", "")
    state = agent._harness_state
    if state.finished:
        return Outcome("finished", state.summary, result)
    return Outcome("no_tool_call", str(result.final_output or ""), result)


def run(instruction: str, executor: Executor, model: Any = None, run_config: RunConfig | None = None) -> Outcome:
    """Run the harness on `instruction` (synchronously)."""
    return asyncio.run(run_async(instruction, executor, model, run_config=run_config))


def _tool(t: dict[str, Any], executor: Executor, model: Any, state: _RunState, depth: int) -> FunctionTool:
    async def invoke(ctx: Any, raw: str) -> str:
        try:
            args = json.loads(raw) if raw and raw.strip() else {}
            if not isinstance(args, dict):
                raise ValueError(f"tool arguments must be a JSON object, got {type(args).__name__}: {raw}")
        except ValueError as e:
            return (f"Your arguments for {t['name']} were not a JSON object ({e}). "
                    "Call the tool again with valid JSON arguments.")
        if t["kind"] == "finish":
            verify = HARNESS["routing"].get("verification")
            if verify is not None and state.challenges < verify["max_rounds"]:
                state.challenges += 1
                return verify["prompt"]
            state.finished, state.summary = True, str(args.get("summary", ""))
            return "Finished."
        if t["kind"] == "agent":
            if depth >= MAX_SUBAGENT_DEPTH:
                return "Sub-agents cannot nest deeper."
            task = args.get("task") or json.dumps(args, ensure_ascii=False)
            sub = await run_async(str(task), executor, model, t["role"], _depth=depth + 1, _deadline=state.deadline)
            return f"[sub-agent {t['role']} ended: {sub.outcome}]\n{sub.summary}"
        output, _ = await asyncio.to_thread(run_tool, t, args, executor, state.deadline)
        return output

    return FunctionTool(name=t["name"], description=t["description"], params_json_schema=t["parameters"],
                        on_invoke_tool=invoke, strict_json_schema=False)
