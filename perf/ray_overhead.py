"""What the Ray executor costs on this machine: trials per minute, local vs Ray, same concurrency.

    python -m perf.ray_overhead [--tasks 12] [--rounds 2] [--concurrency 2] [--agent nop|oracle]
                                [--ray-address ADDR]

Runs the first `--tasks` tasks of terminalbench-sample with `--agent` (images warmed first,
untimed) through run_eval `--rounds` times on each executor, alternating: `local` (the thread
pool) and `ray` (a two-node Ray cluster started here, one CPU per node, as the tests use, or the
cluster at --ray-address). Prints trials per minute for each, their ratio (the Ray overhead),
and the per-trial dispatch overhead: from dispatch to the row back on the driver, minus the
trial's own duration on the node (packing and shipping task files, scheduling, the node's
Docker client, the result's way back). Everything runs under its own run ids and is pruned.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from metaopt.benchmarks.registry import load_benchmark
from metaopt.evaluation import AGENTS, new_run_id, run_eval
from metaopt.evaluation.ray_executor import RayExecutor
from metaopt.sandbox.docker import DockerBackend
from metaopt.traces.store import Store

ROOT = Path(__file__).resolve().parents[1]


def timed_run(tasks, agent, backend, store, concurrency: int, executor=None) -> tuple[float, int]:
    run_id = new_run_id()
    t0 = time.perf_counter()
    result = run_eval(tasks, agent, benchmark="terminalbench-sample", backend=backend, store=store,
                      concurrency=concurrency, run_id=run_id, executor=executor)
    wall = time.perf_counter() - t0
    bad = [r.task_id for r in result.rows if r.status == "error"]
    if bad:
        sys.exit(f"errors in {run_id}: {bad}")
    return wall, len(result.rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", "-j", type=int, default=2)
    ap.add_argument("--agent", default="nop", choices=AGENTS.names())
    ap.add_argument("--ray-address", default=None, help="an existing cluster (default: start a two-node one here)")
    args = ap.parse_args(argv)
    tasks = load_benchmark("terminalbench-sample")[: args.tasks]
    agent = AGENTS.load(args.agent)()
    backend = DockerBackend()
    cluster = None
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "perf.duckdb")
        try:
            address = args.ray_address
            if address is None:
                sys.path.insert(0, str(ROOT / "tests"))
                from _ray_cluster import RayCluster

                cluster = RayCluster(head_cpus=1, env={"METAOPT_NODE_CACHE": str(Path(tmp) / "node")})
                cluster.add_node(num_cpus=1)
                address = cluster.address
            executor = RayExecutor(address, image_map=list(backend.image_map.items()))
            executor.connect()
            timed_run(tasks, agent, backend, store, args.concurrency)  # warm: images built, nothing timed
            timed_run(tasks, agent, backend, store, args.concurrency, executor)  # warm: workers, node cache
            walls: dict[str, list[float]] = {"local": [], "ray": []}
            executor.flights.clear()
            n = 0
            for _ in range(args.rounds):
                for name in ("local", "ray"):
                    wall, n = timed_run(tasks, agent, backend, store, args.concurrency,
                                        executor if name == "ray" else None)
                    walls[name].append(wall)
            flights = executor.flights
        finally:
            store.close()
            if cluster is not None:
                import ray

                ray.shutdown()
                cluster.stop()
    rate = {k: 60 * n / statistics.median(v) for k, v in walls.items()}
    over = sorted(f - d for f, d in flights)
    print(f"{n} trials of terminalbench-sample ({args.agent}), concurrency {args.concurrency}, "
          f"{args.rounds} rounds each, median wall:")
    for k in ("local", "ray"):
        print(f"  {k:<6} {rate[k]:7.1f} trials/min   ({statistics.median(walls[k]):.1f} s per round: "
              f"{', '.join(f'{w:.1f}' for w in walls[k])})")
    print(f"  ray / local throughput: {rate['ray'] / rate['local']:.2f}")
    print(f"  per-trial dispatch overhead (flight - trial), median {statistics.median(over) * 1e3:.0f} ms, "
          f"p90 {over[int(0.9 * (len(over) - 1))] * 1e3:.0f} ms (n={len(over)})")


if __name__ == "__main__":
    main()
