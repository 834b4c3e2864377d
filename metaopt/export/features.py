"""Which harness features a harness uses, and which of them each export format cannot express.

A gap is a feature the harness uses that changes the agent's behaviour and that the target format
cannot reproduce. `metaopt export` refuses to write an export with gaps (exit 2, naming them)
unless --allow-gaps is given; then every gap is listed in the export's README. Nothing is
dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable

from metaopt.task_agent.harness import Harness

# feature -> (description, does the harness use it?)
FEATURES: dict[str, tuple[str, Callable[[Harness], bool]]] = {
    "verification": ("verification phase (finish is challenged routing.verification.max_rounds times)",
                     lambda h: h.routing.verification is not None),
    "context": ("context management (routing.context.max_tokens with on_overflow)",
                lambda h: h.routing.context.max_tokens is not None),
    "max_wall_s": ("wall-clock limit (routing.limits.max_wall_s)", lambda h: h.routing.limits.max_wall_s is not None),
    "sub_agents": ("sub-agents (agent tools that run another role)", lambda h: any(t.kind == "agent" for t in h.tools)),
    "role_max_turns": ("per-role turn limits (routing.roles.*.max_turns)",
                       lambda h: any(r.max_turns is not None for r in h.routing.roles.values())),
    "python_tools": ("python tools (a script run with the arguments as JSON on stdin)",
                     lambda h: any(t.kind == "python" for t in h.tools)),
    "fresh_sessions": ("tools run in a fresh process, optionally as another user (session: fresh, user)",
                       lambda h: any(t.session == "fresh" for t in h.tools if t.kind in ("shell", "python"))),
    "temperature": ("model.temperature", lambda h: h.model.temperature is not None),
    "reasoning_effort": ("model.reasoning_effort", lambda h: h.model.reasoning_effort is not None),
    "thinking_budget": ("model.thinking_budget (Anthropic thinking)", lambda h: h.model.thinking_budget is not None),
}

# format -> {feature: why it cannot be expressed}; features not listed are reproduced.
UNSUPPORTED: dict[str, dict[str, str]] = {
    "harness": {},
    "python": {},
    "inspect": {},
    "harbor": {},
    "openai-agents": {
        "context": "the SDK keeps the whole history; it has no token budget that drops old tool outputs or summarises",
        "max_wall_s": "Runner.run has no wall-clock limit (wrap it in asyncio.wait_for yourself)",
        "thinking_budget": "ModelSettings has no Anthropic thinking budget",
    },
    "claude-agent-sdk": {
        "context": "Claude Code compacts the conversation on its own schedule; a custom token budget cannot be set",
        "max_wall_s": "ClaudeAgentOptions has no wall-clock limit (wrap the query in asyncio.wait_for yourself)",
        "sub_agents": "sub-agents become Claude Code subagents, started through its Task tool, not the harness's "
                      "named agent tools",
        "temperature": "ClaudeAgentOptions has no temperature",
    },
}

# Differences every export of a format has, whatever the harness; listed in its README.
NOTES: dict[str, list[str]] = {
    "python": [("Shell tools run through the executor you pass; `LocalExecutor` carries the working directory and "
               "exported variables between persistent calls, not shell functions or unexported variables.")],
    "inspect": [("The persistent shell is emulated over `sandbox().exec`: the working directory and exported "
                "variables carry over between calls, shell functions and unexported variables do not.")],
    "harbor": [("The persistent shell is emulated over Harbor's `environment.exec`: the working directory and "
                "exported variables carry over between calls, shell functions and unexported variables do not."),
               "The cost is not reported to Harbor (the package carries no price list); token counts are."],
    "openai-agents": [("A call to a tool the agent does not have ends the run with the SDK's ModelBehaviorError "
                      "(the harness loop answers it with an error message instead)."),
                      "Tool outputs carry no is_error flag on the wire (as with metaopt's own OpenAI client)."],
    "claude-agent-sdk": [("Claude Code prefixes MCP tool names: the model sees `mcp__harness__<name>`; prompts that "
                         "name tools still read naturally, but the names differ from the harness's."),
                         "Only Anthropic models run under Claude Code.",
                         ("The SDK's MCP server checks arguments against the tool's schema before the tool runs: "
                         "invalid arguments get its `Input validation error: ...` instead of the harness's message."),
                         ("Claude Code puts its own line (\"You are a Claude agent, built on Anthropic's Claude Agent "
                         "SDK.\") before the harness's system prompt and an environment reminder into the first user "
                         "message.")],
}


def used(harness: Harness) -> list[str]:
    return [name for name, (_, test) in FEATURES.items() if test(harness)]


def gaps(harness: Harness, fmt: str) -> list[str]:
    """Features `harness` uses that `fmt` cannot express, in FEATURES order."""
    missing = UNSUPPORTED.get(fmt, {})  # a plugin format lists none
    return [f for f in used(harness) if f in missing]


def gaps_markdown(harness: Harness, fmt: str) -> str:
    """The "What this export cannot express" README section (always present)."""
    lines = ["## What this export cannot express", ""]
    found = gaps(harness, fmt)
    if not found:
        lines.append("Nothing this harness uses is lost: every feature it uses is reproduced.")
    for f in found:
        lines.append(f"- **{f}** ({FEATURES[f][0]}): {UNSUPPORTED[fmt][f]}")
    if NOTES.get(fmt):
        lines += ["", "Differences of this format whatever the harness:", ""]
        lines += [f"- {n}" for n in NOTES[fmt]]
    return "\n".join(lines) + "\n"


def feature_table() -> str:
    """Markdown table: feature x format (yes / no), for the project README."""
    fmts = list(UNSUPPORTED)
    rows = ["| feature | " + " | ".join(fmts) + " |", "|---" * (len(fmts) + 1) + "|"]
    for name in FEATURES:
        rows.append(f"| {name} | " + " | ".join("no" if name in UNSUPPORTED[f] else "yes" for f in fmts) + " |")
    return "\n".join(rows)
