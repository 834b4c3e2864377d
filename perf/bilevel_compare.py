"""Compare greedy, pareto and bilevel on the same budget: validation gain per trial, repeated seeds.

    python -m perf.bilevel_compare [--seeds 5] [--max-trials 200] [--max-iterations 16] [--out FILE]

The real loop (optimize.py, the gate, the store, traces) on 36 LocalSandbox tasks that write
1..n to a file (n = 1, 12, 24, a third each): under the fake/solution task model the harness's
turn limit is what decides them (the minimal harness's 8 turns pass n=1; 16 pass 12; 32 pass
24), so two successive max_turns raises each gain about a third on validation. The proposer is a stand-in for a
meta-model, the same for every strategy: seeded random mutations in one of four areas (prompts:
a neutral sentence; tools: the bash description; routing: the context limit; limits: max_turns
x2, or the bash timeout / output limit, which do not matter here), so one proposal in twelve
helps. It reads search guidance as a compliant model would: when the guidance names an area
("... the limits area ..."), it picks that area 70% of the time. bilevel runs Level 1.5 and
the built-in mechanisms (Level 2 needs a model that writes code; none is used here).

Prints one JSON line per run and, last, the summary per strategy: mean and SE over seeds of
the best kept validation gain, trials spent, gain per 100 trials and the sealed test score.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

CHECK = """expected=$(seq 1 {n})
if [ "$(cat /app/out.txt 2>/dev/null)" = "$expected" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""
AREAS = ("prompts", "tools", "routing", "limits")


def tasks(root: Path) -> list:
    from metaopt.benchmarks.task import Environment, Solution, Task, Verifier

    out = []
    for i, n in enumerate((1, 12, 24) * 12):
        d = root / f"stair-{i:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "check.sh").write_text(CHECK.format(n=n))
        out.append(Task(id=f"stair-{i:02d}", benchmark="local-stairs", format="local", source_dir=d,
                        instruction=f"Write the numbers 1 to {n} to /app/out.txt, one per line.",
                        environment=Environment(image="host"), workdir="/app", agent_timeout_s=120,
                        verifier=Verifier(files=[(d / "check.sh", "/tests/check.sh")], command="bash /tests/check.sh",
                                          timeout_s=30),
                        scoring="reward", solution=Solution(steps=[f"echo {k} >> /app/out.txt" for k in range(1, n + 1)])))
    return out


class RandomProposer:
    """Seeded random mutations in one area; follows area guidance 70% of the time."""

    name = "random"
    takes_guidance = True

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.n = 0
        self.last_run: dict = {}

    def propose(self, parent, evidence, tried):
        from metaopt.meta_agent.proposers import Revision
        from metaopt.task_agent.harness import Harness
        from metaopt.task_agent.messages import Message

        named = [a for a in AREAS if evidence.guidance and re.search(rf"\b{a}\b area|change[^.]*\b{a}\b",
                                                                     evidence.guidance)]
        for _ in range(20):
            area = self.rng.choice(named) if named and self.rng.random() < 0.7 else self.rng.choice(AREAS)
            self.n += 1
            d = parent.model_dump(mode="json")
            if area == "prompts":
                d["prompts"]["system"] += f"\nNote {self.n}: double-check your work."
            elif area == "tools":
                d["tools"][0]["description"] = f"Run a bash command (variant {self.n})."
            elif area == "routing":
                d["routing"]["context"]["max_tokens"] = self.rng.choice([20_000, 40_000, 80_000, 160_000])
            else:
                knob = self.rng.choice(["max_turns", "timeout_s", "output_limit"])
                if knob == "max_turns":
                    d["routing"]["limits"]["max_turns"] = min(200, d["routing"]["limits"]["max_turns"] * 2)
                else:
                    d["tools"][0][knob] = d["tools"][0][knob] * (3 if knob == "timeout_s" else 4)
            child = Harness.model_validate(d)
            if child.content_hash() not in tried and child.content_hash() != parent.content_hash():
                prompt = f"mutate {area}" + (f"\n\n## Search guidance\n{evidence.guidance}" if evidence.guidance else "")
                self.last_run = {"messages": [Message.user(prompt)]}
                return Revision(child, f"random mutation in {area} (#{self.n})")
        return None


def one(strategy: str, seed: int, args, root: Path, backend) -> dict:
    from metaopt.meta_agent.config import RunConfig
    from metaopt.meta_agent.experiment import plan_experiment, start_experiment
    from metaopt.meta_agent.search.bilevel.config import BilevelConfig
    from metaopt.traces.store import Store

    cfg = RunConfig(benchmark="local-stairs", model="fake/solution", meta_model="heuristic", trials=1, seed=seed,
                    split=(0.34, 0.33, 0.33), max_iterations=args.max_iterations, max_trials=args.max_trials,
                    plateau=args.max_iterations, concurrency=2,
                    strategy="bilevel" if strategy.startswith("bilevel") else strategy,
                    bilevel=BilevelConfig(base="greedy", host="process"))
    t0 = time.monotonic()
    with Store(root / f"{strategy}-{seed}.duckdb") as store:
        exp = start_experiment(plan_experiment(cfg, "minimal", tasks(root / "tasks")), store=store, backend=backend,
                               tracing=None)
        exp.proposer = RandomProposer(seed)
        out = exp.run()
        vals = [c.val_mean for c in out.candidates if c.status in ("baseline", "accepted")
                and c.val_mean is not None]
        trials = store.rows("SELECT count(*) AS n FROM trials WHERE experiment_id = ? AND split <> 'test'",
                            [exp.id])[0]["n"]
        dropped = sum(1 for c in out.candidates if c.status == "invalid")
    gain = (max(vals) - vals[0]) if vals else 0.0
    return {"strategy": strategy, "seed": seed, "gain": gain, "trials": trials, "gain_per_100_trials": 100 * gain / trials,
            "test": out.best_test_score, "baseline_test": out.baseline_test_score, "iterations": out.iterations,
            "accepted": out.accepted, "dropped_before_trials": dropped, "stop": out.stop_reason,
            "seconds": round(time.monotonic() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--max-trials", type=int, default=200)
    ap.add_argument("--max-iterations", type=int, default=16)
    ap.add_argument("--strategies", default="greedy,pareto,bilevel")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    from metaopt.sandbox.local import LocalBackend

    root = Path(tempfile.mkdtemp(prefix="bilevel-compare-"))
    backend = LocalBackend(root / "sandboxes")
    backend.ping()
    rows = []
    for seed in range(args.seeds):
        for strategy in args.strategies.split(","):
            r = one(strategy, seed, args, root, backend)
            rows.append(r)
            print(json.dumps(r), flush=True)
    def ms(xs):
        return {"mean": round(statistics.fmean(xs), 4),
                "se": round(statistics.stdev(xs) / len(xs) ** 0.5, 4) if len(xs) > 1 else None}

    summary = {}
    for strategy in args.strategies.split(","):
        rs = [r for r in rows if r["strategy"] == strategy]
        summary[strategy] = {k: ms([r[k] for r in rs])
                             for k in ("gain", "trials", "gain_per_100_trials", "test", "dropped_before_trials")}
        summary[strategy]["n"] = len(rs)
    line = json.dumps({"summary": summary, "max_trials": args.max_trials, "max_iterations": args.max_iterations})
    print(line)
    if args.out:
        args.out.write_text("\n".join(json.dumps(r) for r in rows) + "\n" + line + "\n")
    backend.prune()


if __name__ == "__main__":
    sys.exit(main())
