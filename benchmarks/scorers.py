"""Scorers by scoring kind: each benchmark registers the scorer of its kind here.

A scorer runs the task's fixed verifier in the sandbox the agent left (after the agent stopped)
and turns what it printed or wrote into a Verdict:

    SCORERS.load(task.scoring)(task, sandbox, VerifyContext(...)) -> Verification

Built-ins: `pytest` (Terminal-Bench 1.x), `reward` (Harbor / TB2), `spreadsheet`, `val_bpb`
(gptpretrain), `inspect` (inspect-ai tasks); plugins add kinds through the `metaopt.scorers`
entry-point group. A scorer never raises for the agent's failures: they are verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from benchmarks.scoring import Verdict, score_pytest, score_reward
from benchmarks.task import Task
from core.registry import Registry
from sandbox.base import Sandbox
from task_agent.messages import Transcript

OUTPUT_LIMIT = 200_000  # characters of verifier output kept per trial (head + tail)

SCORERS = Registry("scoring kind", "metaopt.scorers", {
    "pytest": "benchmarks.scorers:verify_pytest",
    "reward": "benchmarks.scorers:verify_reward",
    "spreadsheet": "benchmarks.spreadsheet.verdict:verify_spreadsheet",
    "val_bpb": "benchmarks.gptpretrain.verify:verify_val_bpb",
    "inspect": "benchmarks.inspect_bridge.scoring:verify_inspect",
})


@dataclass(frozen=True)
class VerifyContext:
    """What a scorer may know besides the task and the sandbox."""

    timeout_multiplier: float = 1.0
    """Scales the verifier's timeout (scores are comparable only at 1.0)."""
    attempt: int = 0
    transcript: Transcript | None = None
    """The agent's transcript, for scorers that grade the answer (None for untraced agents)."""


@dataclass(frozen=True)
class Verification:
    verdict: Verdict
    output: str = ""
    """What the verifier printed (clipped to OUTPUT_LIMIT, head and tail)."""
    exit_code: int | None = None


class Scorer(Protocol):
    def __call__(self, task: Task, sb: Sandbox, ctx: VerifyContext) -> Verification:
        """Run the task's verifier in `sb` and score it. Never raises for the agent's failures."""
        ...


def run_verifier(task: Task, sb: Sandbox, ctx: VerifyContext) -> Verification | tuple[str, int]:
    """Copy the verifier's files in (only now) and run its command as its user in a fresh exec:
    (output, exit code), or a timeout Verification."""
    v = task.verifier
    for host, dest in v.files:
        sb.copy_in(host, dest)
    timeout = v.timeout_s * ctx.timeout_multiplier
    r = sb.exec(v.command, timeout=timeout, workdir=task.workdir, env=v.env, user=v.user)
    output = clip(r.stdout + ("\n" + r.stderr if r.stderr else ""))
    if r.timed_out:
        return Verification(Verdict(0.0, "timeout", failure_mode="test_timeout",
                                    error=f"verifier ran past its {timeout:.0f} s timeout"), output, None)
    return output, r.exit_code


def verify_pytest(task: Task, sb: Sandbox, ctx: VerifyContext) -> Verification:
    run = run_verifier(task, sb, ctx)
    if isinstance(run, Verification):
        return run
    output, code = run
    return Verification(score_pytest(output), output, code)


def verify_reward(task: Task, sb: Sandbox, ctx: VerifyContext) -> Verification:
    sb.exec("rm -f /logs/verifier/reward.txt /logs/verifier/reward.json; mkdir -p /logs/verifier", user="root")
    run = run_verifier(task, sb, ctx)
    if isinstance(run, Verification):
        return run
    output, code = run
    return Verification(score_reward(read_or_none(sb, "/logs/verifier/reward.json"),
                                     read_or_none(sb, "/logs/verifier/reward.txt"), output), output, code)


def read_or_none(sb: Sandbox, path: str) -> bytes | None:
    try:
        return sb.read_file(path)
    except FileNotFoundError:
        return None


def clip(text: str) -> str:
    if len(text) <= OUTPUT_LIMIT:
        return text
    half = OUTPUT_LIMIT // 2
    return text[:half] + f"\n[... {len(text) - OUTPUT_LIMIT} characters omitted ...]\n" + text[-half:]
