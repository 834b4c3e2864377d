"""The Agent protocol the trial runner drives, and the two reference agents: oracle and nop.

An agent works in a started sandbox until it is done or its time runs out. It never sees the
verifier's files: those are copied in only after it returns.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from benchmarks.task import Task
from sandbox.base import Sandbox


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
    extra: dict = field(default_factory=dict)


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


AGENTS = {"oracle": OracleAgent, "nop": NopAgent}


def _tail(text: str, limit: int = 20_000) -> str:
    return text if len(text) <= limit else "[... truncated ...]\n" + text[-limit:]
