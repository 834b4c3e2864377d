"""The Agent protocol the trial runner drives; the reference agents (oracle, nop) and the harness
agent, which runs a Harness with a model through the task agent loop, traced.

An agent works in a started sandbox until it is done or its time runs out. It never sees the
verifier's files: those are copied in only after it returns.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from metaopt.benchmarks.task import Task
from metaopt.core.registry import Registry
from metaopt.sandbox.base import Sandbox
from metaopt.task_agent.harness import Harness
from metaopt.task_agent.loop import TaskAgent
from metaopt.task_agent.messages import Transcript
from metaopt.task_agent.models import get_model


@dataclass
class AgentResult:
    """What an agent reports. Agent failures are data: `error` is set, nothing is raised."""

    timed_out: bool = False
    error: str | None = None
    log: str = ""
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    trace_id: str | None = None
    transcript: Transcript | None = None
    """What the agent said and did, for scorers that grade it (harness agents only)."""
    restored: bool = False
    """The container holds a stored trial's artifacts (evaluation.regrade): its collect hooks ran then."""


class Agent(Protocol):
    name: str

    def run(self, task: Task, sandbox: Sandbox, timeout_s: float, *, ids: dict[str, str] | None = None) -> AgentResult:
        """Work on `task` inside `sandbox`, returning within about `timeout_s` seconds. `ids`
        (run_id, trial_id) label the agent's traces."""
        ...


class NopAgent:
    """Does nothing. A task that passes under it is uninformative."""

    name = "nop"

    def run(self, task: Task, sandbox: Sandbox, timeout_s: float, *, ids: dict[str, str] | None = None) -> AgentResult:
        return AgentResult()


class OracleAgent:
    """Runs the task's own solution as the agent's user, from the task's workdir."""

    name = "oracle"

    def run(self, task: Task, sandbox: Sandbox, timeout_s: float, *, ids: dict[str, str] | None = None) -> AgentResult:
        sol = task.solution
        if sol is None:
            return AgentResult(error=f"task {task.id} has no solution (solution.sh / solve.sh)")
        for host, dest in sol.files:
            sandbox.copy_in(host, dest)
        deadline = time.monotonic() + timeout_s
        if sol.command:
            r = sandbox.exec(sol.command, timeout=timeout_s, workdir=task.workdir, user=task.agent_user)
            return AgentResult(timed_out=r.timed_out, log=_tail(r.stdout + r.stderr), steps=1)
        shell = sandbox.shell(user=task.agent_user, workdir=task.workdir)
        log = []
        try:
            for i, cmd in enumerate(sol.steps):
                left = deadline - time.monotonic()
                if left <= 0:
                    return AgentResult(timed_out=True, log=_tail("".join(log)), steps=i)
                step_timeout = sol.step_timeouts_s[i] if i < len(sol.step_timeouts_s) else left
                r = shell.run(cmd, timeout=min(step_timeout, left))
                log.append(r.stdout + r.stderr)
        finally:
            shell.close()
        return AgentResult(log=_tail("".join(log)), steps=len(sol.steps))


class CheatAgent(OracleAgent):
    """Runs the task's adversarial solution (Terminal-Bench 3's `cheat/solve.sh`) as the oracle
    runs its solution: a verifier that passes it is broken (`metaopt benchmarks check`)."""

    name = "cheat"

    def run(self, task: Task, sandbox: Sandbox, timeout_s: float, *, ids: dict[str, str] | None = None) -> AgentResult:
        if task.cheat is None:
            return AgentResult(error=f"task {task.id} has no cheat solution (cheat/solve.sh)")
        return super().run(task.model_copy(update={"solution": task.cheat}), sandbox, timeout_s, ids=ids)


AGENTS = Registry("agent", "metaopt.agents", {
    "oracle": "metaopt.evaluation.agents:OracleAgent",
    "cheat": "metaopt.evaluation.agents:CheatAgent",
    "nop": "metaopt.evaluation.agents:NopAgent",
}, field="--agent")
"""Reference agents by name (`--agent`); plugins through the `metaopt.agents` entry-point group.
Each target is a class whose instances are Agents, built with no arguments."""


def _tail(text: str, limit: int = 20_000) -> str:
    return text if len(text) <= limit else "[... truncated ...]\n" + text[-limit:]


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
        name = self.model_name  # fake/slow:S:MODEL is fake/MODEL, slower: MODEL's context
        if name.startswith("fake/slow:"):
            name = "fake/" + name.split(":", 2)[-1]
        if name == "fake/solution":
            context = {"solution_commands": _stage_solution(task, sandbox)}
        elif name.startswith("fake/flaky:"):  # stages the solution only on trials it replays
            context = {"trial_id": (ids or {}).get("trial_id"),
                       "stage_solution": lambda: _stage_solution(task, sandbox)}
        elif name.startswith("fake/replay:"):  # the harness-sensitive replay model plays this task's policy
            context = {"task_id": task.id}
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
            transcript=Transcript(messages=ep.messages, answer=ep.summary, outcome=ep.outcome),
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
