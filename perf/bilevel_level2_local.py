"""Level 2 with a real model on this machine, inside the real loop: what it writes and how far up
the validation ladder it gets.

    python -m perf.bilevel_level2_local [--model local/qwen2.5-coder-1.5b] [--rounds 2] [--record-chars 6000]

The bilevel loop on LocalSandbox tasks (the stair tasks of tests/_bilevel_helpers.py, fake/solution
task model). The proposals are scripted (prompt-only revisions that the screen rejects, so the
record has something to read); every Level-2 session is the real model, in one conversation, and
its module climbs the ladder in a sandboxed host like any other. Set METAOPT_LOCAL_CTX (e.g. 16384)
so the protocol, the record and four turns fit the context. Prints one JSON object: per session
its outcome, errors, seconds, the ladder steps of each module, and the generated source.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="local/qwen2.5-coder-1.5b")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--record-chars", type=int, default=6000)
    args = ap.parse_args()
    from _bilevel_helpers import prompt_revision, stair_tasks, write_script

    from metaopt.meta_agent.config import RunConfig
    from metaopt.meta_agent.experiment import plan_experiment, start_experiment
    from metaopt.meta_agent.search.bilevel.config import BilevelConfig
    from metaopt.sandbox.local import LocalBackend
    from metaopt.traces.store import Store

    tmp = Path(tempfile.mkdtemp(prefix="bilevel-l2-"))
    n = 2 + 2 * args.rounds
    meta = write_script(tmp / "meta.yaml", [prompt_revision(i) for i in range(1, n + 1)])
    cfg = RunConfig(benchmark="local-stairs", model="fake/solution", meta_model=meta, trials=1, seed=9,
                    split=(0.34, 0.33, 0.33), max_iterations=n, plateau=n + 1, concurrency=2, strategy="bilevel",
                    bilevel=BilevelConfig(level2_model=args.model, level2_every=2, level2_rounds=args.rounds,
                                          window=1, judge_pairs=1, host="process", record_chars=args.record_chars))
    backend = LocalBackend(tmp / "sandboxes")
    t0 = time.monotonic()
    with Store(tmp / "s.duckdb") as store:
        exp = start_experiment(plan_experiment(cfg, "minimal", stair_tasks(tmp / "tasks")), store=store,
                               backend=backend, tracing=None, on_event=lambda line: print(line, file=sys.stderr))
        exp.run()
        sessions = store.rows("SELECT round, iteration, outcome, errors, mechanism_hash, started_at, finished_at, "
                              "messages FROM level2_sessions WHERE experiment_id = ? ORDER BY round", [exp.id])
        mechs = {r["mechanism_hash"]: r for r in store.rows(
            "SELECT mechanism_hash, name, status, status_reason, source, session_id FROM mechanisms "
            "WHERE experiment_id = ? AND origin = 'generated'", [exp.id])}
        checks = store.rows("SELECT mechanism_hash, step, attempt, ok, reason FROM mechanism_checks "
                            "WHERE experiment_id = ? ORDER BY checked_at", [exp.id])
    backend.prune()
    out = []
    for s in sessions:
        msgs = json.loads(s["messages"])
        sid = f"{exp.id}/level2-{s['round']}"
        mods = [m for m in mechs.values() if m["session_id"] == sid]
        out.append({"round": s["round"], "outcome": s["outcome"], "errors": json.loads(s["errors"]),
                    "seconds": (s["finished_at"] - s["started_at"]).total_seconds(),
                    "reply_chars": [len(m["text"]) for m in msgs if m["role"] == "assistant"],
                    "modules": [{"name": m["name"], "status": m["status"], "reason": m["status_reason"],
                                 "steps": [(c["step"], c["attempt"], c["ok"], c["reason"][:200]) for c in checks
                                           if c["mechanism_hash"] == m["mechanism_hash"]],
                                 "source": m["source"]} for m in mods]})
    print(json.dumps({"model": args.model, "experiment": exp.id, "db": str(tmp / "s.duckdb"),
                      "wall_s": round(time.monotonic() - t0), "sessions": out}, default=str))


if __name__ == "__main__":
    main()
