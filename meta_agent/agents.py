"""Agents the runner can drive: the reference agents (oracle, nop) and the harness agent, which
runs a Harness with a model through the task agent loop, traced."""

from __future__ import annotations

import time
import uuid
from typing import Any

from benchmarks.agents import AgentResult
from benchmarks.task import Task
from sandbox.base import Sandbox
from task_agent.harness import Harness
from task_agent.loop import TaskAgent
from task_agent.models import get_model


class HarnessAgent:
    """A Harness + a model name. A fresh model object per episode (fakes keep step counters)."""

    def __init__(self, harness: Harness, model: str, *, base_url: str | None = None, tracing: Any = None):
        self.harness, self.model_name, self.base_url = harness, model, base_url
        self.tracing = tracing  # traces.tracing.Tracing or None
        self.name = f"{harness.name}@{model}"
        self.version = harness.content_hash()[:12]

    def run(self, task: Task, sandbox: Sandbox, timeout_s: float, *, ids: dict[str, str] | None = None) -> AgentResult:
        deadline = time.monotonic() + timeout_s
        context = None
        if self.model_name == "fake/solution":
            context = {"solution_commands": _stage_solution(task, sandbox)}
        elif self.model_name.startswith("fake/flaky:"):  # stages the solution only on trials it replays
            context = {"trial_id": (ids or {}).get("trial_id"),
                       "stage_solution": lambda: _stage_solution(task, sandbox)}
        model = get_model(self.model_name, base_url=self.base_url, context=context)
        wrap_call = None
        trace_id = None
        if self.tracing is not None:
            model, wrap_call = self.tracing.wrap(model)
        agent = TaskAgent(self.harness, model, sandbox, default_model=self.model_name, workdir=task.workdir,
                          user=task.agent_user, wrap_call=wrap_call)
        if self.tracing is None:
            ep = agent.run(task.instruction, deadline)
        else:
            ids = ids or {}
            with self.tracing.episode(agent_name=self.harness.name, harness_version=self.version,
                                      conversation_id=ids.get("trial_id") or uuid.uuid4().hex,
                                      run_id=ids.get("run_id", ""), trial_id=ids.get("trial_id", ""),
                                      task_id=task.id, provider=model.provider) as span:
                ep = agent.run(task.instruction, deadline)
                span.finish(ep.usage, ep.outcome, ep.error, cost_usd=ep.cost_usd)
                trace_id = span.trace_id
        return AgentResult(
            timed_out=ep.outcome == "time_limit", error=ep.error if ep.outcome == "model_error" else None,
            log=f"outcome: {ep.outcome}; turns: {ep.turns}; tool calls: {ep.tool_calls}\n{ep.summary}",
            steps=ep.turns, input_tokens=ep.usage.input_tokens, output_tokens=ep.usage.output_tokens,
            cost_usd=ep.cost_usd, trace_id=trace_id,
            # the transcript and final answer are for scorers that read them (inspect tasks)
            extra={"outcome": ep.outcome, "harness_version": self.version, "messages": ep.messages, "answer": ep.summary},
        )


def _stage_solution(task: Task, sandbox: Sandbox) -> list[str]:
    """fake/solution replays the task's own solution through the tool path: its files are put in
    place (as the oracle does) and each command becomes one tool call."""
    sol = task.solution
    if sol is None:
        return []
    for host, dest in sol.files:
        sandbox.copy_in(host, dest)
    return [sol.command] if sol.command else list(sol.steps)

