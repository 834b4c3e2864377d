"""One trial: build or find the task image, start a sandbox, let the agent work, then run the
task's fixed verifier in a fresh exec and score its output.

Per-task failures (bad image, agent error, verifier error) become an `error` row; they are never
raised. Only systemic failures (no Docker daemon) and interruption propagate.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.agents import Agent, AgentResult
from benchmarks.scoring import Verdict, score_pytest, score_reward
from benchmarks.task import Task, TaskLoadError
from sandbox.base import Sandbox, SandboxSpec
from sandbox.errors import SandboxError, SandboxUnavailable
from traces.store import now

OUTPUT_LIMIT = 200_000  # characters of verifier output kept per trial (head + tail)


class ImageCache:
    """Builds each task's image once per run, even with concurrent trials of one task."""

    def __init__(self, backend: Any):
        self.backend = backend
        self._lock = threading.Lock()
        self._per_task: dict[str, tuple[threading.Lock, list]] = {}

    def get(self, task: Task) -> tuple[str, str]:
        """(image tag, working dir). Raises SandboxError subclasses, cached per task."""
        with self._lock:
            lock, slot = self._per_task.setdefault(task.id, (threading.Lock(), []))
        with lock:
            if not slot:
                try:
                    slot.append(("ok", self._build(task)))
                except SandboxUnavailable:
                    raise
                except SandboxError as e:
                    slot.append(("err", e))
            kind, value = slot[0]
        if kind == "err":
            raise value
        return value

    def _build(self, task: Task) -> tuple[str, str]:
        env = task.environment
        image = None
        if env.image:
            try:
                image = self.backend.resolve_image(env.image)
            except SandboxError:
                if env.context_dir is None:
                    raise
        if image is None:
            image = self.backend.build_image(Path(env.context_dir), env.dockerfile, name=task.id)
        workdir = task.workdir or self.backend.image_workdir(image) or "/"
        return image, workdir


def run_trial(task: Task | TaskLoadError, attempt: int, agent: Agent, *, backend: Any, images: ImageCache,
              run_id: str, timeout_multiplier: float = 1.0) -> dict[str, Any]:
    """Run one trial and return its `trials` row. Never raises for per-task failures."""
    t0 = time.monotonic()
    row: dict[str, Any] = {
        "trial_id": f"{run_id}/{task.id}/{attempt}",
        "run_id": run_id,
        "task_id": task.id,
        "attempt": attempt,
        "agent": agent.name,
        "timeout_multiplier": timeout_multiplier,
        "started_at": now(),
    }
    if isinstance(task, TaskLoadError):
        return _finish(row, t0, status="error", failure_mode="task_invalid", error=task.error)
    row["benchmark"] = task.benchmark
    try:
        image, workdir = images.get(task)
    except SandboxUnavailable:
        raise
    except SandboxError as e:
        return _finish(row, t0, status="error", failure_mode="environment_error", error=f"{task.id}: {e}")
    row["image"] = image
    task = task.model_copy(update={"workdir": workdir})
    spec = SandboxSpec(
        image=image, workdir=workdir, user=task.agent_user, cpus=task.resources.cpus,
        memory_mb=task.resources.memory_mb, gpus=task.resources.gpus, network=task.network,
        labels={"metaopt.task_id": task.id, "metaopt.attempt": str(attempt)},
    )
    try:
        with backend.start(spec, run_id=run_id) as sb:
            sb.exec("mkdir -p /logs/agent /logs/verifier /logs/artifacts", user="root")
            a0 = time.monotonic()
            result = agent.run(task, sb, task.agent_timeout_s * timeout_multiplier,
                               ids={"run_id": run_id, "trial_id": row["trial_id"]})
            row.update(agent_duration_s=time.monotonic() - a0, agent_timed_out=result.timed_out,
                       agent_log=result.log, input_tokens=result.input_tokens,
                       output_tokens=result.output_tokens, cost_usd=result.cost_usd, trace_id=result.trace_id)
            if result.error:
                return _finish(row, t0, status="error", failure_mode="agent_error", error=result.error)
            v0 = time.monotonic()
            verdict, output, exit_code = verify(task, sb, timeout_multiplier, result, attempt)
            row.update(verifier_duration_s=time.monotonic() - v0, test_output=output, verifier_exit_code=exit_code)
    except SandboxUnavailable:
        raise
    except SandboxError as e:
        return _finish(row, t0, status="error", failure_mode="sandbox_error", error=f"{task.id}: {e}")
    status, mode = verdict.status, verdict.failure_mode
    if result.timed_out and status == "failed":
        status, mode = "timeout", "agent_timeout"
    return _finish(row, t0, score=verdict.score, status=status, failure_mode=mode, error=verdict.error,
                   tests=verdict.tests, rewards=verdict.rewards)


def verify(task: Task, sb: Sandbox, timeout_multiplier: float = 1.0, result: AgentResult | None = None,
           attempt: int = 0) -> tuple[Verdict, str, int | None]:
    """Copy the verifier in (only now), run it as its user in a fresh exec, and score it.
    Inspect tasks are scored by their own inspect scorers on `result` (the agent's answer)."""
    v = task.verifier
    if v.stop_agent_processes:  # first, whatever the scoring kind: nothing may watch the verifier
        stop_agent_processes(sb)
    if task.scoring == "val_bpb":  # retrains train.py and evaluates it: its own sequence
        from benchmarks.gptpretrain.verify import verify_val_bpb

        return verify_val_bpb(task, sb, timeout_multiplier)
    if task.scoring == "inspect":
        from benchmarks.inspect_bridge import score_inspect  # lazy: inspect-ai is slow to import

        return score_inspect(task, sb, result, v.timeout_s * timeout_multiplier, attempt)
    if task.scoring == "reward":
        sb.exec("rm -f /logs/verifier/reward.txt /logs/verifier/reward.json; mkdir -p /logs/verifier", user="root")
    for host, dest in v.files:
        sb.copy_in(host, dest)
    r = sb.exec(v.command, timeout=v.timeout_s * timeout_multiplier, workdir=task.workdir, env=v.env, user=v.user)
    output = _clip(r.stdout + ("\n" + r.stderr if r.stderr else ""))
    if r.timed_out:
        return Verdict(0.0, "timeout", failure_mode="test_timeout",
                       error=f"verifier ran past its {v.timeout_s * timeout_multiplier:.0f} s timeout"), output, None
    if task.scoring == "pytest":
        return score_pytest(output), output, r.exit_code
    if task.scoring == "reward":
        return score_reward(_read(sb, "/logs/verifier/reward.json"), _read(sb, "/logs/verifier/reward.txt"), output), output, r.exit_code
    if task.scoring == "spreadsheet":
        from benchmarks.spreadsheet.verdict import score_spreadsheet
        return score_spreadsheet(_read(sb, "/logs/verifier/spreadsheet.json"), output), output, r.exit_code
    raise ValueError(f"scoring kind {task.scoring!r} has no scorer in the terminal runner")


# Everything but the container's init (PID 1), its main process (the oldest child of PID 1) and
# this script and its wrapper. Processes that `docker exec` started have parent 0, their orphans parent 1.
_STOP_SCRIPT = r"""
main=""
for d in /proc/[0-9]*; do
  p=${d#/proc/}; s=$(cat "$d/stat" 2>/dev/null) || continue; s=${s##*) }; set -- $s
  if [ "$2" = 1 ] && { [ -z "$main" ] || [ "$p" -lt "$main" ]; }; then main=$p; fi
done
for d in /proc/[0-9]*; do
  p=${d#/proc/}; case " 1 $$ $PPID $main " in *" $p "*) continue;; esac; kill -9 "$p" 2>/dev/null
done
true
"""


def stop_agent_processes(sb: Sandbox) -> None:
    """Kill every process the agent left in `sb` (background jobs, its shell); the container
    itself keeps running for the verifier."""
    sb.exec(_STOP_SCRIPT, user="root", timeout=30)


def _read(sb: Sandbox, path: str) -> bytes | None:
    try:
        return sb.read_file(path)
    except FileNotFoundError:
        return None


def _clip(text: str) -> str:
    if len(text) <= OUTPUT_LIMIT:
        return text
    half = OUTPUT_LIMIT // 2
    return text[:half] + f"\n[... {len(text) - OUTPUT_LIMIT} characters omitted ...]\n" + text[-half:]


def _finish(row: dict[str, Any], t0: float, **fields: Any) -> dict[str, Any]:
    row.update(fields)
    row["duration_s"] = round(time.monotonic() - t0, 3)
    row["finished_at"] = now()
    return row
