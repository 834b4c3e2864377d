"""Verify and score a gptpretrain trial (the `val_bpb` scoring kind), on the host side.

1. The verifier folder (score.py, the pristine prepare.py and baseline, the hidden validation
   split) is copied into a root-only /verifier, only now that the agent has stopped.
2. `score.py fingerprint` says what hardware this is; the baseline's val_bpb for (fingerprint,
   task build: data, mode, budget, fixed files) is looked up in the baseline cache.
3. `score.py run` retrains the agent's final train.py (and, when the cache has no entry, the
   baseline first, in the same container) and evaluates the checkpoints; we read its result file.

Score: the relative improvement (baseline - val_bpb) / baseline, clipped to [0, 1]; the trial
passes when that is at least the task's `min_improvement` (above run-to-run noise). A candidate
that crashes, overruns, writes outside its directory, tampers with fixed files, saves no or a bad
checkpoint, or reaches a NaN loss fails with score 0 and the reason. A baseline that cannot be
measured is an `error` (not the agent's fault), never a score.

The cache is a JSON file, `<cache root>/gptpretrain/baselines.json` (see build.cache_root), so
every later trial on the same hardware and budget compares against the same measured number.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from metaopt.benchmarks.gptpretrain.build import cache_root
from metaopt.benchmarks.scorers import Verification, VerifyContext
from metaopt.benchmarks.scoring import Verdict
from metaopt.benchmarks.task import Task
from metaopt.sandbox.base import Sandbox

RESULT = "/verifier/result.json"


def verify_val_bpb(task: Task, sb: Sandbox, ctx: VerifyContext) -> Verification:
    """The `val_bpb` scorer. Never raises for the candidate's failures."""
    return Verification(*_verify(task, sb, ctx.timeout_multiplier, ctx.toolchain))


def _verify(task: Task, sb: Sandbox, timeout_multiplier: float, tc: Any = None) -> tuple[Verdict, str, int | None]:
    """`tc` (sandbox.toolchain.Toolchain, at verify time) runs the runner's own steps."""
    v = task.verifier
    if tc is not None:
        tc.fresh_dirs(["/verifier"], mode="700")
    else:
        sb.exec("rm -rf /verifier && mkdir -m 700 /verifier", user="root")
    for host, dest in v.files:
        sb.copy_in(host, dest)
    fp = sb.exec("python3 /verifier/score.py fingerprint", timeout=120, user="root")
    if fp.exit_code != 0:
        return Verdict(None, "error", failure_mode="verifier_error",
                       error=f"score.py fingerprint failed: {(fp.stderr or fp.stdout).strip()[-300:]}"), fp.stdout + fp.stderr, fp.exit_code
    fingerprint = json.loads(fp.stdout.strip().splitlines()[-1])
    key = baseline_key(task, fingerprint)
    cached = load_baselines().get(key)
    cmd = v.command + ("" if cached else " --baseline")
    r = sb.exec(cmd, timeout=v.timeout_s * timeout_multiplier, workdir="/", user="root")
    output = r.stdout + ("\n" + r.stderr if r.stderr else "")
    if r.timed_out:
        return Verdict(None, "error", failure_mode="test_timeout",
                       error=f"scorer ran past its {v.timeout_s * timeout_multiplier:.0f} s timeout"), output, None
    try:
        result = json.loads(sb.read_file(RESULT))
    except (FileNotFoundError, ValueError) as e:
        return Verdict(None, "error", failure_mode="verifier_error",
                       error=f"score.py wrote no result ({e}): {output.strip()[-300:]}"), output, r.exit_code
    if cached is None:
        base = result.get("baseline") or {}
        if base.get("status") != "ok":
            return Verdict(None, "error", failure_mode="baseline_error",
                           error=f"the baseline train.py failed here: {base.get('reason')}"), output, r.exit_code
        cached = {"val_bpb": base["val_bpb"], "tokens_per_second": base.get("tokens_per_second"),
                  "mfu_percent": base.get("mfu_percent"), "fingerprint": fingerprint,
                  "task": task.id, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
        save_baseline(key, cached)
    return score(result.get("candidate") or {}, cached, float(task.metadata.get("min_improvement") or 0.0)), output, r.exit_code


def score(cand: dict[str, Any], baseline: dict[str, Any], min_improvement: float) -> Verdict:
    """The verdict for one candidate result against the cached baseline. (The hardware
    fingerprint is in the verifier output, which the trial row keeps as test_output.)"""
    if cand.get("status") != "ok":
        mode = cand.get("failure_mode") or "train_failed"
        reason = cand.get("reason") or "no result for train.py"
        tail = cand.get("log_tail") or ""
        return Verdict(0.0, "failed", tests={"train": "failed"}, failure_mode=mode,
                       error=f"{mode}: {reason}" + (f"\n--- log tail ---\n{tail[-3000:]}" if tail else ""),
                       rewards={"baseline_val_bpb": baseline["val_bpb"]})
    val, base = float(cand["val_bpb"]), float(baseline["val_bpb"])
    improvement = (base - val) / base
    passed = improvement >= min_improvement
    rewards = {"val_bpb": val, "baseline_val_bpb": base, "improvement": improvement}
    for k in ("tokens_per_second", "mfu_percent", "training_seconds", "wall_seconds"):
        if cand.get(k) is not None:
            rewards[k] = float(cand[k])
    return Verdict(min(1.0, max(0.0, improvement)), "passed" if passed else "failed",
                   tests={"train": "passed", "beats_baseline": "passed" if passed else "failed"},
                   failure_mode=None if passed else "no_improvement", rewards=rewards,
                   error=None if passed else f"val_bpb {val:.4f} does not beat the baseline {base:.4f} "
                                             f"by {min_improvement:.1%}")


def baseline_key(task: Task, fingerprint: dict[str, Any]) -> str:
    """Hardware fingerprint + the task build (data, mode, budget, fixed files)."""
    blob = json.dumps([fingerprint, task.metadata.get("baseline_key")], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def baselines_path() -> Path:
    return cache_root() / "gptpretrain" / "baselines.json"


def load_baselines() -> dict[str, dict[str, Any]]:
    path = baselines_path()
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}


def save_baseline(key: str, entry: dict[str, Any]) -> None:
    path = baselines_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_suffix(".lock")):
        data = load_baselines()
        data[key] = entry
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(path)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
