"""Same-seed row dumps of whole experiments: what a refactor of the loop must leave unchanged.

    python3 tests/_row_dump.py pareto bilevel [readme] --out DIR     writes DIR/<scenario>.json
    python3 tests/_row_dump.py readme --compare                      compares with tests/data/rows/

Each scenario runs one experiment with a fixed seed and a fixed experiment id in its own temporary
store and dumps the rows the decisions wrote (experiment, candidates, gate_decisions,
budget_ledger, trials), without timestamps, durations, random span and trace ids, the experiment
id replaced by EXP. `pareto` and `bilevel` run on LocalSandbox (root); `readme` is the README's
offline job (terminalbench-sample, minimal, fake/solution, heuristic) in Docker.
tests/test_same_rows.py compares a fresh dump with the one recorded in tests/data/rows/.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bilevel_helpers import stair_tasks
from _local_tasks import CHECK, step_tasks

from metaopt.benchmarks.task import Verifier
from metaopt.evaluation import TrialResult
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.experiment import plan_experiment, start_experiment
from metaopt.meta_agent.records import Candidate, ExperimentRecord, GateDecision, Spend
from metaopt.meta_agent.search.bilevel.config import BilevelConfig
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing

EXPERIMENT_ID = "exp-20260101-000000-rows"
SKIP = {"created_at", "decided_at", "recorded_at", "started_at", "finished_at",  # timestamps
        "duration_s", "evidence", "proposal_trace_id"}  # durations; span and trace ids: random per run
LOCAL = ("pareto", "bilevel")
SCENARIOS = (*LOCAL, "readme")


def mixed_tasks(root: Path) -> list:
    """step_tasks and 3 tasks of 40 steps that only a later candidate fixes (test_seeded_runs)."""
    tasks = step_tasks(root)
    for i in range(3):
        d = root / f"long-{i}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "check.sh").write_text(CHECK.format(n=40))
        tasks.append(tasks[0].model_copy(update={
            "id": f"long-{i}", "source_dir": d, "instruction": "Write the numbers 1 to 40 to /app/out.txt, one per line.",
            "verifier": Verifier(files=[(d / "check.sh", "/tests/check.sh")], command="bash /tests/check.sh",
                                 timeout_s=30),
            "solution": tasks[0].solution.model_copy(update={"steps": [f"echo {k} >> /app/out.txt"
                                                                       for k in range(1, 41)]})}))
    return tasks


def scenario(name: str, root: Path) -> tuple[RunConfig, str, list | None]:
    """(config, starting harness, tasks: None for the benchmark's own) of scenario `name`."""
    if name == "pareto":
        return (RunConfig(benchmark="local-steps", model="fake/solution", meta_model="heuristic", strategy="pareto",
                          trials=1, seed=3, split=(0.25, 0.5, 0.25), max_iterations=8, plateau=8, concurrency=2,
                          max_trials=200), "minimal", mixed_tasks(root / "tasks"))
    if name == "bilevel":
        return (RunConfig(benchmark="local-stairs", model="fake/solution", meta_model="heuristic", strategy="bilevel",
                          trials=1, seed=9, split=(0.34, 0.33, 0.33), max_iterations=6, plateau=20, concurrency=2,
                          bilevel=BilevelConfig(builtins=["tabu", "bandit", "explore"], level15_every=1,
                                                level2_every=2, window=1, judge_pairs=1, host="process")),
                "minimal", stair_tasks(root / "tasks"))
    if name == "readme":  # metaopt run --benchmark terminalbench-sample --harness minimal --model fake/solution
        return RunConfig(benchmark="terminalbench-sample", model="fake/solution", meta_model="heuristic"), "minimal", None
    raise ValueError(f"unknown scenario {name!r}: one of {', '.join(SCENARIOS)}")


def dump(name: str, backend: Any, root: Path) -> dict[str, list]:
    """Run scenario `name` on `backend` in a new store under `root`; its rows, plain."""
    cfg, harness, tasks = scenario(name, root)
    with Store(root / "s.duckdb") as store:
        tracing = Tracing.for_store(store)
        try:
            exp = start_experiment(plan_experiment(cfg, harness, tasks), store=store, backend=backend,
                                   tracing=tracing, experiment_id=EXPERIMENT_ID)
            exp.run()
        finally:
            tracing.shutdown()
        where, args = "experiment_id = ?", [EXPERIMENT_ID]
        rows: dict[str, list] = {
            "experiment": [(r.splits, r.result["stop_reason"] if r.result else None)
                           for r in store.select(ExperimentRecord, where, args)],
            "candidates": store.select(Candidate, where, args, order="iteration"),
            "gate_decisions": store.select(GateDecision, where, args),
            "budget_ledger": store.select(Spend, where, args),
            "trials": [{"candidate_id": r.candidate_id, "split": r.split, "task_id": r.task_id, "attempt": r.attempt,
                        "score": r.score, "status": r.status, "error": r.error}
                       for r in store.select(TrialResult, where, args)]}
    order = {c.candidate_id: c.iteration for c in rows["candidates"]}
    rows["gate_decisions"].sort(key=lambda d: (order[d.candidate_id], d.decided_at))  # written in this order
    rows["budget_ledger"].sort(key=lambda s: (s.kind, s.candidate_id or "", s.ref or "", s.usd or 0.0))
    rows["trials"].sort(key=lambda t: (order[t["candidate_id"]], t["split"], t["task_id"], t["attempt"]))
    return json.loads(json.dumps({table: [plain(r) for r in rs] for table, rs in rows.items()}, default=str))


def plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        value = {k: v for k, v in value.model_dump(mode="json").items() if k not in SKIP}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k not in ("spans", "span_ids", *SKIP)}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value.replace(EXPERIMENT_ID, "EXP") if isinstance(value, str) else value


def differences(a: dict[str, list], b: dict[str, list]) -> list[str]:
    """Where dump `b` differs from dump `a`, one line per differing row (empty: the same rows)."""
    out = []
    for table in sorted(set(a) | set(b)):
        x, y = a.get(table, []), b.get(table, [])
        if len(x) != len(y):
            out.append(f"{table}: {len(x)} rows before, {len(y)} after")
        out += [f"{table}[{i}]: {r} != {s}" for i, (r, s) in enumerate(zip(x, y)) if r != s]
    return out


def backend_for(name: str) -> Any:
    if name == "readme":
        from metaopt.api import docker_backend

        return docker_backend()
    from metaopt.sandbox.local import LocalBackend

    return LocalBackend(Path(tempfile.mkdtemp(prefix="rows-sandboxes-")))


def main(argv: list[str]) -> None:
    """--out DIR writes each scenario's rows; --compare checks them against tests/data/rows/ (exit 1
    on a difference)."""
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else Path(".")
    names, bad = [a for a in argv if a in SCENARIOS], 0
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        backend = backend_for(name)
        with tempfile.TemporaryDirectory(prefix=f"rows-{name}-") as tmp:
            rows = dump(name, backend, Path(tmp))
        backend.prune()
        if "--compare" in argv:
            found = differences(json.loads((Path(__file__).parent / "data" / "rows" / f"{name}.json").read_text()), rows)
            bad += len(found)
            print(name, f"{len(found)} rows differ", *found[:20], sep="\n  ", flush=True)
            continue
        (out / f"{name}.json").write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
        print(name, {t: len(r) for t, r in rows.items()}, flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
