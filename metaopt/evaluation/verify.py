"""Verify a finished trial: the integrity steps (evaluation.integrity: tamper scan from outside,
every agent process stopped, the verifier's directories recreated), then the task's fixed scorer,
looked up by its scoring kind (benchmarks.scorers.SCORERS), then the verdict judged: tampered,
re-checked on a pristine container, or as the scorer gave it."""

from __future__ import annotations

from dataclasses import replace

from metaopt.benchmarks.scorers import SCORERS, Verification, VerifyContext
from metaopt.benchmarks.scoring import Verdict
from metaopt.benchmarks.task import Task
from metaopt.core.errors import SandboxError, SandboxUnavailable, VerifierBlocked
from metaopt.evaluation.integrity import TrialIntegrity
from metaopt.sandbox.base import Sandbox
from metaopt.sandbox.toolchain import StopReport, Toolchain

RECHECKED = {"pytest", "reward", "spreadsheet"}
"""Scoring kinds whose infra-looking errors are re-run on a pristine container (the others need
the agent's answer, or measure their own baseline)."""


def verify(task: Task, sb: Sandbox, ctx: VerifyContext, integrity: TrialIntegrity | None = None) -> Verification:
    """Score the sandbox the agent left. Never raises for the agent's failures. `integrity`
    (made by run_trial before the agent ran) knows the container's start; without it the
    checks that need that (PID 1 untouched, the pristine re-check) are skipped."""
    integ = integrity or TrialIntegrity(task, sb)
    scorer = SCORERS.load(task.scoring)

    def scored(steps: TrialIntegrity) -> Verification:
        try:
            tc = steps.prepare()
            at = task.model_copy(update={"workdir": steps.verifier[1]}) if steps.separate and steps.verifier else task
            return scorer(at, steps.box, replace(ctx, env={**ctx.env, **steps.env()}, toolchain=tc, check=steps.check_tests,
                                                   command=steps.command(), runner_report=steps.runner_report()))
        except VerifierBlocked as b:  # not run as designed: never a weaker mode (evaluation.capture)
            verdict: Verdict = b.verdict  # type: ignore[assignment]  # core.errors knows no Verdict (layers)
            return Verification(verdict, verdict.error or "")
        except SandboxUnavailable:
            raise
        except SandboxError as e:  # copying the tests in, running or reading them failed: re-checked (RECHECK)
            return Verification(Verdict(None, "error", failure_mode="verifier_error", error=f"the verifier could not run: {e}"[:500]))
        finally:
            steps.release()

    checked = scored(integ)

    def rerun(psb: Sandbox, pinteg: TrialIntegrity):  # the same verifier on a container no agent touched
        return pinteg.judge(scored(pinteg).verdict, "")

    verdict = integ.judge(checked.verdict, checked.output, rerun if task.scoring in RECHECKED else None)
    return replace(checked, verdict=verdict)


def stop_agent_processes(sb: Sandbox, keep_services: bool = False) -> StopReport:
    """Kill every process the agent left in `sb` (background jobs, its shell), through the static
    toolchain (sandbox.toolchain); with `keep_services`, processes holding a listening socket and
    their descendants are spared. The container itself keeps running for the verifier."""
    return Toolchain.install(sb).stop_agent_processes(keep_listeners=keep_services)
