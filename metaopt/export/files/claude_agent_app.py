"""The harness on the Claude Agent SDK: `build_options(executor)` and `run(instruction, executor)`.

Claude Code's built-in tools are switched off; the harness's tools are served in-process by an
SDK MCP server named `harness` (the model sees `mcp__harness__<name>`). Shell and python tools
run through the executor (harness_runtime.py: metaopt's rendering, argument checks and
truncation); the finish tool answers with the verification prompt for the harness's
verification rounds, then a PostToolUse hook stops the session. Roles reached by agent tools
become Claude Code subagents. What the SDK cannot express is listed in README.md.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from claude_agent_sdk import (AgentDefinition, ClaudeAgentOptions, HookMatcher, create_sdk_mcp_server, query,
                              tool)

from .harness_agent import HarnessAgent, load_harness
from .harness_runtime import Executor, run_tool

HARNESS = load_harness()
SERVER = "harness"


def mcp_name(name: str) -> str:
    return f"mcp__{SERVER}__{name}"


@dataclass
class RunState:
    challenges: int = 0
    finished: bool = False
    summary: str = ""


def harness_tools(executor: Executor, state: RunState) -> list[Any]:
    """Every harness tool except agent tools (those become subagents), as SDK MCP tools."""
    return [_tool(t, executor, state) for t in HARNESS["tools"] if t["kind"] != "agent"]


def build_options(executor: Executor, state: RunState | None = None, **overrides: Any) -> ClaudeAgentOptions:
    """ClaudeAgentOptions reproducing the harness; `overrides` go to ClaudeAgentOptions (cwd, ...)."""
    state = state or RunState()
    view = HarnessAgent(None, executor, HARNESS)
    start = HARNESS["routing"]["start_role"]
    sub_roles = sorted({t["role"] for t in HARNESS["tools"] if t["kind"] == "agent"})
    model = HARNESS.get("model", {})

    async def stop_after_finish(hook_input: Any, tool_use_id: Any, context: Any) -> dict[str, Any]:
        return {"continue_": False, "stopReason": "finished"} if state.finished else {}

    def allowed(role: str) -> list[str]:
        return [mcp_name(t["name"]) for t in view.tools_for(role) if t["kind"] != "agent"]

    agents = {role: AgentDefinition(description=f"The harness role {role!r}.", prompt=view.system_prompt(role),
                                    tools=allowed(role), maxTurns=HARNESS["routing"]["roles"][role].get("max_turns"))
              for role in sub_roles}
    options: dict[str, Any] = dict(
        system_prompt=view.system_prompt(start),
        tools=["Task"] if agents else [],  # no built-in tools; Task starts subagents
        allowed_tools=allowed(start) + (["Task"] if agents else []),
        mcp_servers={SERVER: create_sdk_mcp_server(SERVER, tools=harness_tools(executor, state))},
        max_turns=view.h["routing"]["roles"][start].get("max_turns") or HARNESS["routing"]["limits"]["max_turns"],
        model=(model.get("model") or "").removeprefix("anthropic/") or None,
        agents=agents or None,
        hooks={"PostToolUse": [HookMatcher(matcher=mcp_name("finish"), hooks=[stop_after_finish])]},
    )
    if model.get("thinking_budget"):
        options["max_thinking_tokens"] = model["thinking_budget"]
    if model.get("reasoning_effort"):
        options["effort"] = model["reasoning_effort"]
    return ClaudeAgentOptions(**{**options, **overrides})


async def run_async(instruction: str, executor: Executor, **overrides: Any) -> tuple[RunState, list[Any]]:
    """Run the harness on `instruction`; returns the finish state and the SDK's messages."""
    state = RunState()
    prompt = HARNESS["prompts"]["task_template"].replace("{instruction}", instruction)
    messages = [m async for m in query(prompt=prompt, options=build_options(executor, state, **overrides))]
    return state, messages


def run(instruction: str, executor: Executor, **overrides: Any) -> tuple[RunState, list[Any]]:
    return asyncio.run(run_async(instruction, executor, **overrides))


def _tool(t: dict[str, Any], executor: Executor, state: RunState) -> Any:
    async def handler(args: dict[str, Any]) -> dict[str, Any]:
        text, is_error = await invoke(t, args, executor, state)
        return {"content": [{"type": "text", "text": text}], "is_error": is_error}

    return tool(t["name"], t["description"], t["parameters"])(handler)


async def invoke(t: dict[str, Any], args: Any, executor: Executor, state: RunState) -> tuple[str, bool]:
    """What the harness tool `t` answers to `args`: (text, is_error)."""
    if not isinstance(args, dict):
        return (f"Your arguments for {t['name']} were not a JSON object ({json.dumps(args)}). "
                "Call the tool again with valid JSON arguments."), True
    if t["kind"] == "finish":
        verify = HARNESS["routing"].get("verification")
        if verify is not None and state.challenges < verify["max_rounds"]:
            state.challenges += 1
            return verify["prompt"], False
        state.finished, state.summary = True, str(args.get("summary", ""))
        return "Finished.", False
    return await asyncio.to_thread(run_tool, t, args, executor)
