"""Harbor job folders (`harbor run -o JOBS --job-name NAME`) read into the store.

    JOB/config.json, JOB/result.json                       the job
    JOB/<trial>/result.json                                one trial (harbor.models.trial.result)
    JOB/<trial>/agent/trajectory.json                      its ATIF trajectory, when the agent wrote one
    JOB/<trial>/verifier/{reward.txt,test-stdout.txt}      the verifier's outputs

One run (`harbor-<job name>`, or the caller's), one trial per trial folder (attempts numbered
per task in start order), spans and messages from each trajectory (traces.atif). Rows go through
the store's writers (Store.begin_run / insert / end_run, the tracing exporter). Idempotent: a
trial already in the store is skipped, so importing a job twice adds nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from metaopt.benchmarks.scoring import parse_pytest_summary
from metaopt.core.errors import HarborJobError
from metaopt.evaluation.result import Status, TrialResult, trial_row
from metaopt.traces import queries
from metaopt.traces.atif import replay
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing

KEEP = 8000  # chars of verifier output / agent log kept, head and tail

# Harbor exception type -> (status, failure_mode), for a trial without a valid reward.
_EXCEPTIONS: dict[str, tuple[Status, str]] = {
    "AgentTimeoutError": ("timeout", "agent_timeout"),
    "VerifierTimeoutError": ("timeout", "test_timeout"),
    "RewardFileNotFoundError": ("error", "parse_error"),
    "RewardFileEmptyError": ("error", "parse_error"),
    "VerifierOutputParseError": ("error", "parse_error"),
}


@dataclass
class ImportResult:
    run_id: str
    job_dir: Path
    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "job_dir": str(self.job_dir), "imported": len(self.imported),
                "skipped": len(self.skipped), "trial_ids": self.imported}


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise HarborJobError(f"{path}: missing (not a Harbor job folder?)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise HarborJobError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise HarborJobError(f"{path}: expected a JSON object")
    return data


def _clip(text: str) -> str:
    return text if len(text) <= KEEP else f"{text[:KEEP // 2]}\n[... {len(text) - KEEP} chars ...]\n{text[-KEEP // 2:]}"


def _time(v: Any) -> datetime | None:
    if not v:
        return None
    t = datetime.fromisoformat(str(v))  # Python 3.11+ reads a trailing Z
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t  # the store keeps naive UTC


def _span_s(timing: Any) -> float | None:
    if not isinstance(timing, dict):
        return None
    a, b = _time(timing.get("started_at")), _time(timing.get("finished_at"))
    return (b - a).total_seconds() if a and b else None


def job_trials(job_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(trial folder, its result.json) of every finished trial of the job, in start order."""
    job_dir = Path(job_dir)
    _read(job_dir / "config.json")
    _read(job_dir / "result.json")
    out = [(d, _read(d / "result.json")) for d in sorted(job_dir.iterdir()) if (d / "result.json").is_file()]
    return sorted(out, key=lambda t: (str(t[1].get("started_at") or ""), t[0].name))


def trial_record(trial_dir: Path, r: dict[str, Any], *, run_id: str, benchmark: str, task_id: str,
                 attempt: int) -> TrialResult:
    """A Harbor trial's result.json and verifier outputs as a TrialResult (trace_id unset)."""
    verifier = trial_dir / "verifier"
    out = "\n".join(p.read_text(errors="replace") for p in (verifier / "test-stdout.txt", verifier / "test-stderr.txt")
                    if p.is_file())
    rewards = ((r.get("verifier_result") or {}).get("rewards")) or None
    exc = r.get("exception_info") or None
    score: float | None = None
    if rewards:
        score = float(rewards["reward"]) if "reward" in rewards else sum(rewards.values()) / len(rewards)
        score = min(1.0, max(0.0, score))
    status: Status = "passed" if score is not None and score >= 1.0 else "failed"
    mode: str | None = None if status == "passed" else "tests_failed"
    if exc:
        status, mode = _EXCEPTIONS.get(str(exc.get("exception_type")), ("error", "agent_error"))
        if status == "error":
            score = None
    elif score is None:
        status, mode = "error", "parse_error"
    agent_info = r.get("agent_info") or {}
    model = ((agent_info.get("model_info") or {}) or {}).get("name")
    ctx = r.get("agent_result") or {}
    logs = sorted(p for p in (trial_dir / "agent").glob("*.txt")) if (trial_dir / "agent").is_dir() else []
    return trial_row(
        run_id, task_id, attempt, benchmark=benchmark,
        agent=f"{agent_info.get('name', 'harbor')}@{model}" if model else str(agent_info.get("name", "harbor")),
        score=score, status=status, failure_mode=mode,
        error=f"{exc.get('exception_type')}: {exc.get('exception_message', '')}"[:2000] if exc else None,
        tests=parse_pytest_summary(out) if out else None, rewards=rewards, test_output=_clip(out) if out else None,
        agent_timed_out=(exc or {}).get("exception_type") == "AgentTimeoutError",
        agent_log=_clip("\n".join(p.read_text(errors="replace") for p in logs)) if logs else None,
        duration_s=_span_s(r), agent_duration_s=_span_s(r.get("agent_execution")),
        verifier_duration_s=_span_s(r.get("verifier")),
        timeout_multiplier=(r.get("config") or {}).get("timeout_multiplier"),
        input_tokens=ctx.get("n_input_tokens"), output_tokens=ctx.get("n_output_tokens"), cost_usd=ctx.get("cost_usd"),
        started_at=_time(r.get("started_at")), finished_at=_time(r.get("finished_at")))


def import_trial(store: Store, trial_dir: Path, r: dict[str, Any], *, run_id: str, benchmark: str = "harbor",
                 tracing: Tracing | None = None, extra: dict[str, Any] | None = None) -> TrialResult | None:
    """Write one Harbor trial (its folder and result.json as a dict) as the next attempt of its task
    in `run_id`; None when the run already holds it (same task, same start time)."""
    task_id = str(r.get("task_name") or trial_dir.name.split("__")[0])
    have = queries.task_attempts(store, run_id, task_id)
    started = _time(r.get("started_at"))
    if any(h["started_at"] == started for h in have):
        return None
    attempt = max((h["attempt"] for h in have), default=-1) + 1
    rec = trial_record(trial_dir, r, run_id=run_id, benchmark=benchmark, task_id=task_id, attempt=attempt)
    traj = trial_dir / "agent" / "trajectory.json"
    if tracing is not None and traj.is_file():
        rec.trace_id = replay(tracing, _read(traj), run_id=run_id, trial_id=rec.trial_id, task_id=task_id,
                              outcome=rec.status, error=rec.error)
    rec = rec.model_copy(update=extra or {})
    store.insert(rec)
    return rec


def import_job(store: Store, job_dir: Path, *, tracing: Tracing | None = None, benchmark: str = "harbor",
               run_id: str | None = None, tasks: set[str] | None = None, attempts: int | None = None,
               extra: dict[str, Any] | None = None) -> ImportResult:
    """Import every trial of `job_dir` (only `tasks`, and the first `attempts` per task, when
    given) into run `run_id`; `extra` fields (experiment_id, candidate_id, split) are set on each
    trial. Trajectories become spans when `tracing` is given. Raises HarborJobError."""
    job_dir = Path(job_dir)
    run_id = run_id or job_run_id(job_dir)
    result = ImportResult(run_id, job_dir)
    trials = job_trials(job_dir)
    agents = sorted({str((r.get("agent_info") or {}).get("name", "harbor")) for _, r in trials})
    store.begin_run(run_id, benchmark=benchmark, agent=",".join(agents) or "harbor", dataset=str(job_dir),
                    args={"imported_from": str(job_dir), "harbor_job_id": _read(job_dir / "result.json").get("id")})
    seen: dict[str, int] = {}
    for trial_dir, r in trials:
        task_id = str(r.get("task_name") or trial_dir.name.split("__")[0])
        seen[task_id] = seen.get(task_id, 0) + 1
        if (tasks is not None and task_id not in tasks) or (attempts is not None and seen[task_id] > attempts):
            continue
        rec = import_trial(store, trial_dir, r, run_id=run_id, benchmark=benchmark, tracing=tracing, extra=extra)
        (result.imported if rec else result.skipped).append(rec.trial_id if rec else trial_dir.name)
    store.end_run(run_id, "finished")
    return result


def job_run_id(job_dir: Path) -> str:
    """The run a Harbor job is imported into by default: `harbor-<job name>`."""
    name = _read(Path(job_dir) / "config.json").get("job_name") or Path(job_dir).name
    return f"harbor-{name}"
