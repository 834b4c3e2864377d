"""Proposals decided per hour at `--parallel` N = 1, 2, 4, 8, with fake models that take real time.

    python -m perf.swarm_speedup [--proposal-s 6] [--turn-s 1] [--parallel 1,2,4,8] [--per-slot 3]

The meta-model is `placebo:S` (S seconds per proposal, as an API meta-model would take) and the
task model `fake/slow:T:flaky:0.5` (T seconds per model call, then a fair coin per trial: noise
and no signal), so every run is also a null experiment: whatever N, it must accept nothing. Trials
run on LocalSandbox (needs root) over generated one-step tasks, K = 1, 12 tasks. Each N proposes
max(12, per_slot x N) candidates; the rate is candidates decided over the loop's wall time (after
the baseline, to the last decision). Prints one table row per N and the speed-up over N = 1.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from metaopt.benchmarks.task import Environment, Solution, Task, Verifier
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.experiment import plan_experiment, start_experiment
from metaopt.sandbox.local import LocalBackend
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing

CHECK = """if [ "$(cat /app/out.txt 2>/dev/null)" = "1" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


def tasks(root: Path, n: int = 12) -> list[Task]:
    out = []
    for i in range(n):
        d = root / f"one-{i:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "check.sh").write_text(CHECK)
        out.append(Task(id=f"one-{i:02d}", benchmark="local-swarm", format="local", source_dir=d,
                        instruction="Write 1 to /app/out.txt.", environment=Environment(image="host"), workdir="/app",
                        agent_timeout_s=120, scoring="reward", solution=Solution(steps=["echo 1 > /app/out.txt"]),
                        verifier=Verifier(files=[(d / "check.sh", "/tests/check.sh")], command="bash /tests/check.sh",
                                          timeout_s=30)))
    return out


def one(n: int, proposals: int, proposal_s: float, turn_s: float, root: Path) -> dict:
    """One experiment at --parallel n: its decided count, loop wall time and what it accepted."""
    cfg = RunConfig(benchmark="local-swarm", model=f"fake/slow:{turn_s:g}:flaky:0.5", meta_model=f"placebo:{proposal_s:g}",
                    trials=1, seed=0, split=(0.5, 0.25, 0.25), max_iterations=proposals, plateau=10_000,
                    concurrency=2, parallel=n, canary=False)
    marks: dict[str, float] = {}

    def event(line: str) -> None:
        if line.startswith("baseline:") and "per trial" in line:
            marks["loop"] = time.monotonic()
        elif line.startswith("stopped:"):
            marks["stop"] = time.monotonic()

    backend = LocalBackend(root / "sandboxes")
    with Store(root / "s.duckdb") as store:
        tracing = Tracing.for_store(store)
        exp = start_experiment(plan_experiment(cfg, "minimal", tasks(root / "tasks")), store=store, backend=backend,
                               tracing=tracing, on_event=event)
        report = exp.run()
        tracing.shutdown()
        trials = store.rows("SELECT count(*) AS n FROM trials WHERE experiment_id = ? AND split NOT IN ('test') "
                            "AND candidate_id != ?", [exp.id, f"{exp.id}/c0"])[0]["n"]
    backend.prune()
    wall = marks["stop"] - marks["loop"]
    return {"n": n, "decided": report.iterations, "wall_s": wall, "per_hour": report.iterations * 3600 / wall,
            "accepted": report.accepted, "alpha": report.alpha_committed or 0.0, "trials": trials}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--proposal-s", type=float, default=6.0, help="seconds per proposal (placebo:S)")
    ap.add_argument("--turn-s", type=float, default=1.0, help="seconds per task-model call (fake/slow:T:...)")
    ap.add_argument("--parallel", default="1,2,4,8", help="the N to measure, comma-separated")
    ap.add_argument("--per-slot", type=int, default=3, help="candidates proposed per slot (max(12, this x N))")
    a = ap.parse_args()
    rows = []
    print(f"placebo:{a.proposal_s:g} + fake/slow:{a.turn_s:g}:flaky:0.5, LocalSandbox, K = 1, 12 tasks; "
          f"load {os.getloadavg()[0]:.1f}")
    print("| N | decided | loop wall | decided per hour | speed-up | candidates' trials | accepted | alpha committed |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in a.parallel.split(",")):
        with tempfile.TemporaryDirectory() as d:
            r = one(n, max(12, a.per_slot * n), a.proposal_s, a.turn_s, Path(d))
        rows.append(r)
        print(f"| {n} | {r['decided']} | {r['wall_s']:.0f} s | {r['per_hour']:.0f} | "
              f"{r['per_hour'] / rows[0]['per_hour']:.2f}x | {r['trials']} | {r['accepted']} | {r['alpha']:.4f} |", flush=True)
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
