"""The bilevel strategy on the GPT-pretraining task, offline, CPU smoke mode, as a measurement.

    METAOPT_PRETRAIN_MODE=smoke python -m perf.bilevel_gptpretrain [--iterations 3] [--db PATH]

The inner loop is the task agent's own train.py search (it edits /app/train.py, runs
`python3 prepare.py run` for dev_bpb, and the fixed evaluator retrains the final train.py and
scores val_bpb); the optimizer searches the harness that drives it, and the bilevel outer loop
steers that search. Here the task model is fake/solution (it replays the known-good edit, peak LR
1e-3 -> 4e-3) and the meta-model is a scripted fake that writes prompt-only revisions and holds
one Level-2 session (examples/bilevel/prompt_tabu.py), so every part runs: trials scored by
val_bpb, hooks called, a generated mechanism validated on this task's real record.

gptpretrain is ONE task, so it stands in every split here (train, validation and sealed test
are separate fresh trials of it). The gate needs at least 3 validation tasks to accept, so no
candidate can be accepted on this task alone: what this measures is that the strategy runs
here, what it costs (seconds per trial and per iteration), and the val_bpb the trials got.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--db", type=Path, default=None)
    args = ap.parse_args()

    import yaml
    from _bilevel_helpers import MINIMAL, PROMPT_TABU, level2_steps, prompt_revision, spec

    from metaopt.benchmarks.registry import load_benchmark
    from metaopt.meta_agent.config import RunConfig
    from metaopt.meta_agent.experiment import Plan, start_experiment
    from metaopt.meta_agent.search.bilevel.config import BilevelConfig
    from metaopt.sandbox.docker import DockerBackend
    from metaopt.traces.store import Store
    from metaopt.traces.tracing import Tracing

    tmp = Path(tempfile.mkdtemp(prefix="bilevel-gpt-"))
    steps = [prompt_revision(1), prompt_revision(2),
             *level2_steps(spec("prompt_tabu", ["on_result", "guidance", "filter", "state_dict", "load_state_dict"]),
                           PROMPT_TABU)] + [prompt_revision(n) for n in range(3, args.iterations + 1)]
    (tmp / "meta.yaml").write_text(yaml.safe_dump(steps))
    cfg = RunConfig(benchmark="gptpretrain", model="fake/solution", meta_model=f"fake/script:{tmp / 'meta.yaml'}",
                    trials=1, max_iterations=args.iterations, plateau=args.iterations + 1, concurrency=1,
                    strategy="bilevel", bilevel=BilevelConfig(level2_every=2, window=1, judge_pairs=1))
    task = load_benchmark("gptpretrain", None, None)[0]
    plan = Plan(cfg, "minimal", MINIMAL, [task], {"train": [task.id], "validation": [task.id], "test": [task.id]})
    t0 = time.monotonic()
    with Store(args.db or tmp / "s.duckdb") as store:
        tracing = Tracing.for_store(store)
        exp = start_experiment(plan, store=store, backend=DockerBackend(), tracing=tracing,
                               on_event=lambda line: print(line, file=sys.stderr, flush=True))
        out = exp.run()
        tracing.shutdown()
        trials = store.rows("SELECT candidate_id, split, score, duration_s, rewards FROM trials WHERE experiment_id = ?",
                            [exp.id])
        calls = store.rows("SELECT mechanism, hook, status, count(*) AS n FROM mechanism_calls WHERE experiment_id = ?"
                           " GROUP BY ALL ORDER BY 1, 2", [exp.id])
        checks = store.rows("SELECT step, ok, reason FROM mechanism_checks WHERE experiment_id = ? ORDER BY checked_at",
                            [exp.id])
    bpb = [json.loads(t["rewards"])["val_bpb"] for t in trials if t["rewards"] and "val_bpb" in json.loads(t["rewards"])]
    base = [json.loads(t["rewards"]).get("baseline_val_bpb") for t in trials if t["rewards"]]
    print(json.dumps({
        "experiment_id": exp.id, "wall_s": round(time.monotonic() - t0), "trials": len(trials),
        "trial_s_median": statistics.median(t["duration_s"] for t in trials if t["duration_s"]),
        "val_bpb": {"n": len(bpb), "min": min(bpb), "max": max(bpb), "mean": statistics.fmean(bpb)} if bpb else None,
        "baseline_val_bpb": next((b for b in base if b), None),
        "candidates": [(c.id.rsplit("/", 1)[-1], c.status) for c in out.candidates],
        "stop": out.stop_reason, "mechanism_calls": calls, "ladder": checks, "bilevel": out.bilevel},
        default=str))


if __name__ == "__main__":
    main()
