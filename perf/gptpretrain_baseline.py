"""Measure the gptpretrain baseline on this machine: val_bpb, tokens/s, MFU (GPU), trial time.

    python -m perf.gptpretrain_baseline [--mode smoke|gpu] [--budget S] [--repeat N]

Each repeat is one nop trial in a fresh cache (so the baseline is trained and evaluated in the
sandbox, exactly as a scored trial does) and prints one JSON line; the last line is the summary.
On a shared machine the numbers move with the load (smoke mode counts CPU seconds, which keeps
the number of training steps steadier than wall time would).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default=None)
    ap.add_argument("--budget", default=None)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()

    from metaopt.benchmarks.gptpretrain.build import build_task, config_from_env
    from metaopt.evaluation import ImageCache, NopAgent, run_trial
    from metaopt.sandbox.docker import DockerBackend
    from metaopt.sandbox.images import ImageMap

    env = dict(os.environ)
    if args.mode:
        env["METAOPT_PRETRAIN_MODE"] = args.mode
    if args.budget:
        env["METAOPT_PRETRAIN_BUDGET_S"] = args.budget
    backend = DockerBackend(image_map=ImageMap.load())
    images = ImageCache(backend)
    rows = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            os.environ["METAOPT_CACHE_DIR"] = cache
            task = build_task(cfg=config_from_env(env))
            t0 = time.monotonic()
            row = run_trial(task, i, NopAgent(), backend=backend, images=images, run_id=f"perf-gptpretrain-{i}")
            backend.prune(f"perf-gptpretrain-{i}")
        out = json.loads(row.test_output or "{}")
        base = out.get("baseline") or {}
        rec = {"mode": task.metadata["mode"], "budget_s": task.metadata["time_budget_s"],
               "baseline_val_bpb": base.get("val_bpb"), "tokens_per_second": base.get("tokens_per_second"),
               "mfu_percent": base.get("mfu_percent"), "steps": base.get("steps"),
               "same_code_again_val_bpb": (out.get("candidate") or {}).get("val_bpb"),  # run-to-run noise
               "train_wall_s": base.get("wall_seconds"), "trial_wall_s": round(time.monotonic() - t0, 1),
               "fingerprint": out.get("fingerprint"), "status": row.status, "error": row.error}
        rows.append(rec)
        print(json.dumps(rec), flush=True)
    ok = [r for r in rows if r["baseline_val_bpb"] is not None]
    if ok:
        print(json.dumps({"summary": True, "n": len(ok),
                          "baseline_val_bpb_mean": statistics.mean(r["baseline_val_bpb"] for r in ok),
                          "baseline_val_bpb_sd": statistics.pstdev(r["baseline_val_bpb"] for r in ok),
                          "tokens_per_second_mean": statistics.mean(r["tokens_per_second"] or 0 for r in ok),
                          "load_avg_1m": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
