"""The task agent: one loop that interprets a Harness against a Sandbox.

Ask the model, run its tool calls in the sandbox, append the results, repeat; stop on `finish`,
on a turn with no tool call, or at the turn, time or context limit. Before each call the history
is trimmed to the harness's context budget and to the model's own window where it knows one
(models.base.CountsTokens); a conversation that outgrows them even so is the agent's failure
(context_limit), not a model error. The message history is the trace: tracing wraps the model
and the tool runner (traces/instrument.py), it is not sprinkled through this loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from metaopt.sandbox.base import Sandbox, Shell
from metaopt.task_agent.harness import Harness, ToolDef
from metaopt.task_agent.messages import Message, ToolCallPart, ToolResultPart, ToolSpec, Usage
from metaopt.task_agent.models.base import CONTEXT_OVERFLOW, Model
from metaopt.task_agent.tools import ToolOutcome, run_tool

Dispatch = Callable[[], "tuple[ToolResultPart, ToolOutcome | None]"]
# Wraps the handling of one tool call (tracing opens an execute_tool span around it).
CallWrapper = Callable[[ToolCallPart, Dispatch], "tuple[ToolResultPart, ToolOutcome | None]"]
MAX_SUBAGENT_DEPTH = 2
DROPPED = "[output dropped to fit the context window]"
SUMMARIZE = ("The conversation is about to exceed the context window. Summarise your progress so far for "
             "yourself: what you found, what you changed (files, commands), what works, what is left to do, "
             "and anything you must not forget. Reply with the summary only; do not call tools.")
SUMMARY_HEADER = "[Context was full. Your own summary of the work so far:]"


@dataclass
class Episode:
    """How an episode ended. outcome: finished | no_tool_call | turn_limit | time_limit |
    context_limit | model_error. `error` says why for model_error, and for a context_limit the
    model's server reported."""

    outcome: str
    messages: list[Message]
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    turns: int = 0
    tool_calls: int = 0
    error: str | None = None
    summary: str = ""


class TaskAgent:
    """Runs `harness` with `model` in `sandbox`. One instance per episode."""

    def __init__(self, harness: Harness, model: Model, sandbox: Sandbox, *,
                 default_model: str | None = None, wrap_call: CallWrapper | None = None,
                 workdir: str | None = None, user: str | None = None):
        self.harness, self.model, self.sandbox = harness, model, sandbox
        self.settings = harness.model_settings(default_model or model.name)
        self.wrap_call = wrap_call or (lambda call, dispatch: dispatch())
        self.workdir, self.user = workdir, user
        self._shell: Shell | None = None
        self.usage, self.cost = Usage(), 0.0

    def run(self, instruction: str, deadline: float) -> Episode:
        """Work on `instruction` until done or `deadline` (time.monotonic()). Never raises for
        model or tool failures: they end the episode with an outcome and an error."""
        limit = self.harness.routing.limits.max_wall_s
        if limit is not None:
            deadline = min(deadline, time.monotonic() + limit)
        try:
            return self._episode(self.harness.routing.start_role, instruction, deadline, depth=0)
        finally:
            if self._shell is not None:
                self._shell.close()

    def _episode(self, role: str, instruction: str, deadline: float, depth: int) -> Episode:
        h = self.harness
        tools = {t.name: t for t in h.tools_for(role)}
        specs = h.tool_specs(role)
        max_turns = h.routing.roles[role].max_turns or h.routing.limits.max_turns
        messages = [Message.system(h.system_prompt(role)), Message.user(h.render_task(instruction))]
        ep = Episode("turn_limit", messages)
        challenges = 0
        for turn in range(max_turns):
            if time.monotonic() >= deadline:
                ep.outcome = "time_limit"
                break
            try:  # a call may take at most the time left: slow (local) models stop at the deadline too
                if not self._fit_context(messages, specs):
                    ep.outcome = "context_limit"
                    break
                response = self.model.generate(messages, specs, self.settings.model_copy(
                    update={"timeout_s": max(1.0, deadline - time.monotonic())}))
            except Exception as e:  # noqa: BLE001 - provider errors end the episode; the trial records them
                if time.monotonic() >= deadline:  # it ran into the time limit: not a model failure
                    ep.outcome = "time_limit"
                else:  # a window the conversation outgrew is the agent's failure, not the model's
                    overflow = getattr(e, "error_type", None) == CONTEXT_OVERFLOW
                    ep.outcome, ep.error = "context_limit" if overflow else "model_error", f"{type(e).__name__}: {e}"
                break
            ep.turns = turn + 1
            self.usage = self.usage + response.usage
            self.cost += response.cost_usd or 0.0
            messages.append(response.message)
            calls = response.message.tool_calls
            if not calls:
                ep.outcome, ep.summary = "no_tool_call", response.message.text
                break
            results, finished = [], False
            for call in calls:
                ep.tool_calls += 1
                tool = tools.get(call.name)
                if tool is not None and tool.kind == "finish" and not call.arguments_error:
                    verify = h.routing.verification
                    if verify is not None and challenges < verify.max_rounds:
                        challenges += 1
                        reply = verify.prompt
                    else:
                        finished, ep.summary, reply = True, str(call.arguments.get("summary", "")), "Finished."
                    part, _ = self.wrap_call(call, lambda r=reply, c=call: (ToolResultPart(id=c.id, response=r), None))
                else:
                    part, _ = self.wrap_call(call, lambda c=call, t=tool: self._call(c, t, tools, deadline, depth))
                results.append(part)
            messages.append(Message(role="tool", parts=results))
            if finished:
                ep.outcome = "finished"
                break
        ep.usage, ep.cost_usd = self.usage, self.cost
        return ep

    def _call(self, call: ToolCallPart, tool: ToolDef | None, tools: dict[str, ToolDef],
              deadline: float, depth: int) -> tuple[ToolResultPart, ToolOutcome | None]:
        def error(text: str) -> tuple[ToolResultPart, None]:
            return ToolResultPart(id=call.id, response=text, is_error=True), None

        if call.arguments_error:
            return error(f"Your arguments for {call.name} were not a JSON object ({call.arguments_error}). "
                         "Call the tool again with valid JSON arguments.")
        if tool is None:
            return error(f"Unknown tool {call.name!r}. Available tools: {', '.join(tools)}.")
        if tool.kind == "agent":
            if depth >= MAX_SUBAGENT_DEPTH:
                return error("Sub-agents cannot nest deeper.")
            task = call.arguments.get("task") or json.dumps(call.arguments, ensure_ascii=False)
            sub = self._episode(tool.role or "", str(task), deadline, depth + 1)
            last = sub.summary or (sub.messages[-1].text if sub.messages else "")
            return ToolResultPart(id=call.id, response=f"[sub-agent {tool.role} ended: {sub.outcome}]\n{last}"), None
        shell = self._session() if tool.session == "persistent" else None
        out = run_tool(tool, call.arguments, self.sandbox, shell, deadline=deadline)
        return ToolResultPart(id=call.id, response=out.output, is_error=out.is_error), out

    def _session(self) -> Shell:
        if self._shell is None:
            self._shell = self.sandbox.shell(user=self.user, workdir=self.workdir)
        return self._shell

    def _fit_context(self, messages: list[Message], tools: list[ToolSpec]) -> bool:
        """Keep the request under the harness's budget and under the model's context window less
        room for the reply. False = it cannot fit."""
        ctx = self.harness.routing.context
        limit = request_limit(ctx.max_tokens, getattr(self.model, "context_window", None), self.settings.max_tokens)
        if limit is None or self._tokens(messages, tools) <= limit:
            return True
        if ctx.on_overflow == "stop":
            return False
        if ctx.on_overflow == "summarize" and self._summarize(messages) and self._tokens(messages, tools) <= limit:
            return True
        # truncate_oldest_tool_outputs (also what summarize falls back to)
        for i, m in enumerate(messages):
            if m.role != "tool":
                continue
            parts = [p.model_copy(update={"response": DROPPED}) if isinstance(p, ToolResultPart) else p
                     for p in m.parts]
            messages[i] = Message(role="tool", parts=parts)
            if self._tokens(messages, tools) <= limit:
                return True
        return self._tokens(messages, tools) <= limit

    def _tokens(self, messages: list[Message], tools: list[ToolSpec]) -> int:
        """The request's size as the model counts it (models.base.CountsTokens), else characters / 4."""
        count = getattr(self.model, "count_tokens", None)
        return count(messages, tools) if count is not None else _tokens(messages)

    def _summarize(self, messages: list[Message]) -> bool:
        """Replace the history after the task by the model's own summary of it (as Terminus-2 does
        when the context fills). False when the model could not give one."""
        try:
            r = self.model.generate([*messages, Message.user(SUMMARIZE)], [], self.settings)
        except Exception:  # noqa: BLE001 - a failed summary is not fatal: the caller truncates instead
            return False
        self.usage, self.cost = self.usage + r.usage, self.cost + (r.cost_usd or 0.0)
        if not r.message.text.strip():
            return False
        task = messages[1].text
        messages[1:] = [Message.user(f"{task}\n\n{SUMMARY_HEADER}\n{r.message.text.strip()}")]
        return True


def _tokens(messages: list[Message]) -> int:
    return sum(len(json.dumps(m.to_otel(), ensure_ascii=False)) for m in messages) // 4


def request_limit(budget: int | None, window: int | None, reply: int) -> int | None:
    """Most tokens a request's history may hold: the harness's budget, and the model's window less
    room for the reply. The room is the reply's max_tokens, but at most a quarter of the window:
    harnesses ask for up to 8192 (the whole window of a small local model), and a server stops a
    reply at the window's end anyway."""
    limits = [n for n in (budget, window and window - min(reply, window // 4)) if n]
    return min(limits) if limits else None
