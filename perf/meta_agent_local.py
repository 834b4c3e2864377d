"""How long a small local model takes to bring one meta-agent proposal to the guard.

Target: a qwen2.5-coder-1.5b proposal reaches the guard in under 10 minutes on a quiet machine.

Evidence first (real Docker trials, no model): `metaopt eval` of the weak `minimal` harness with
`fake/solution` on sample tasks it fails (11-12 solution steps against 8 turns) and one it passes,
into a fresh store. Then, per model: build the LLMProposer (this starts the embedded llama.cpp
server: the load time), run one traced proposal over the failing trials (compact profile:
temperature 0, 10 turns), and check the revision with the diff guard, as `metaopt run` does.

    python -m perf.meta_agent_local [--models local/qwen2.5-coder-0.5b,local/qwen2.5-coder-1.5b]
                                    [--repeat 1] [--db PATH]

Prints one row per proposal: load s, wall s to the guard, turns, tokens in (of them served from
the prompt cache) / out, output tokens per second of wall time, the session's outcome, what the
guard said, and the load average before and after (a busy machine is several times slower).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FAILING = ["clean-customer-export", "cut-release-branch", "rotate-service-logs"]
PASSING = ["hello-greetings"]
MODELS = "local/qwen2.5-coder-0.5b,local/qwen2.5-coder-1.5b"


def evidence(db: Path) -> None:
    """The minimal harness's trials on the sample tasks, traced into `db` (real containers)."""
    cmd = [sys.executable, "-m", "metaopt.cli", "eval", "--benchmark", "terminalbench-sample", "--harness",
           "minimal", "--model", "fake/solution", "--tasks", ",".join(FAILING + PASSING), "--db", str(db), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    if r.returncode != 0:
        sys.exit(f"metaopt eval failed ({r.returncode}): {r.stderr.strip()[-500:]}")


def propose(db: Path, model: str) -> dict:
    from metaopt.benchmarks.registry import load_benchmark
    from metaopt.meta_agent.guard import Guard
    from metaopt.meta_agent.proposers import Evidence
    from metaopt.meta_agent.proposers.llm import LLMProposer
    from metaopt.task_agent.harness_io import load_harness, resolve_harness
    from metaopt.traces.store import Store
    from metaopt.traces.tracing import Tracing

    parent = load_harness(resolve_harness("minimal"))
    t0 = time.monotonic()
    proposer = LLMProposer(model, on_event=lambda line: print("  " + line, flush=True))
    load_s = time.monotonic() - t0
    with Store(db) as store:
        failing = [r["trial_id"] for r in store.rows("SELECT trial_id FROM trials WHERE score IS NULL OR score < 1"
                                                     " ORDER BY task_id")]
        tracing = Tracing.for_store(store)
        before = os.getloadavg()[0]
        t0 = time.monotonic()
        rev = proposer.propose(parent, Evidence(store, failing, "perf-meta-agent", tracing=tracing), set())
        wall = time.monotonic() - t0
        tracing.shutdown()
    run = proposer.last_run
    if rev is None:
        guard = f"not reached ({run['outcome']})"
    else:
        problem = Guard(load_benchmark("terminalbench-sample", task_ids=FAILING + PASSING)).check(parent, rev.harness)
        guard = f"refused: {problem}" if problem else "valid"
    u = run.get("usage")
    return {"model": model, "load_s": load_s, "wall_s": wall, "turns": run["turns"], "outcome": run["outcome"],
            "guard": guard, "in": u.input_tokens if u else 0, "cached": (u.cache_read_tokens or 0) if u else 0,
            "out": u.output_tokens if u else 0, "load_before": before, "load_after": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--db", type=Path, default=None, help="store to fill (default: a temporary file)")
    args = ap.parse_args()
    db = args.db or Path(tempfile.mkdtemp(prefix="metaopt-perf-")) / "meta.duckdb"
    t0 = time.monotonic()
    evidence(db)
    print(f"evidence: minimal + fake/solution on {len(FAILING) + len(PASSING)} sample tasks in "
          f"{time.monotonic() - t0:.0f} s ({db})")
    print(f"{'model':28} {'load s':>7} {'wall s':>7} {'turns':>5} {'tok in (cached)':>16} {'out':>5} "
          f"{'out/s':>6}  load avg  outcome -> guard")
    for model in args.models.split(","):
        for _ in range(args.repeat):
            r = propose(db, model.strip())
            print(f"{r['model']:28} {r['load_s']:7.1f} {r['wall_s']:7.1f} {r['turns']:5d} "
                  f"{r['in']:>8} ({r['cached']:>5}) {r['out']:5d} {r['out'] / max(r['wall_s'], 1e-9):6.2f}  "
                  f"{r['load_before']:4.1f}-{r['load_after']:<4.1f} {r['outcome']} -> {r['guard']}", flush=True)


if __name__ == "__main__":
    main()
