"""The meta-bench figures: each meta-model on the built-in cases, one proposal per case.

    python -m perf.meta_bench [--models oracle,placebo,heuristic,local/qwen2.5-coder-1.5b,...]
                              [--cases a,b,...] [--budget-s 3600] [--db PATH] [--out FILE.json]

Per model: fixed k/n with its 95% Wilson interval, cause named, collateral, turns, tokens, cost and
wall time (the local models run on this machine's CPU: minutes per proposal). `--budget-s` bounds
each model's wall time: no new case starts after it, and the row says how many cases it covered.
The same as `metaopt bench meta` per model, with a time bound and one summary table.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

MODELS = "oracle,placebo,heuristic,local/qwen2.5-coder-1.5b,local/qwen2.5-coder-0.5b"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--budget-s", type=float, default=3600.0)
    ap.add_argument("--db", default="/tmp/meta_bench_perf.duckdb")
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    from metaopt.meta_bench.bench import BenchResult, run_case
    from metaopt.meta_bench.case import load_cases
    from metaopt.meta_bench.results import save
    from metaopt.traces.store import Store

    cases = load_cases()
    if args.cases:
        wanted = set(args.cases.split(","))
        cases = [c for c in cases if c.name in wanted]
    summary = []
    with Store(args.db) as store:
        for model in args.models.split(","):
            res = BenchResult(f"perf-{time.strftime('%Y%m%d-%H%M%S')}-{model.replace('/', '_')}", model)
            t0, load0 = time.monotonic(), os.getloadavg()[0]
            for case in cases:
                if time.monotonic() - t0 > args.budget_s:
                    break
                row = run_case(case, model, res.bench_id, on_event=lambda line: print("  " + line, flush=True))
                save(store, row)
                res.rows.append(row)
                print(f"{model} {case.name}: fixed={row.fixed} named={row.cause_named} broken={row.broken} "
                      f"turns={row.turns} {row.wall_s:.0f}s {row.error or ''}", flush=True)
            s = res.totals()
            summary.append({"model": model, **s, "of_cases": len(cases), "load": [load0, os.getloadavg()[0]],
                            "rows": [r.model_dump(mode="json") for r in res.rows]})
            lo, hi = s["fixed_ci95"]
            print(f"| {model} | {s['fixed']}/{s['cases']} ({lo:.0%}-{hi:.0%}) | {s['cause_named']}/{s['cases']} | "
                  f"{s['collateral']} | {s['turns']} | {s['input_tokens'] + s['output_tokens']:,} | "
                  f"${s['cost_usd']:.2f} | {s['wall_s']:.0f} s |", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()
