"""What a mechanism host costs: start-up, one hook call, the whole ladder on a recorded ledger.

    python -m perf.mechanism_host [--docker] [--calls 200]

Prints one JSON object (medians in milliseconds). The process host is a `python3 -I -S` child as
user nobody in its own network namespace; the Docker host a metaopt-base container without network.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docker", action="store_true")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--starts", type=int, default=5)
    args = ap.parse_args()
    from _bilevel_helpers import PROMPT_TABU, recorded

    from metaopt.meta_agent.search.bilevel.host import DockerHost, ProcessHost
    from metaopt.meta_agent.search.bilevel.ladder import LadderInput, contract_step, dry_run_step
    from metaopt.meta_agent.search.bilevel.static import imports_step, parse_step

    backend = None
    if args.docker:
        from metaopt.sandbox.docker import DockerBackend
        backend = DockerBackend()

    def new():
        return DockerHost(PROMPT_TABU, backend, "perf-mechanism-host") if backend else ProcessHost(PROMPT_TABU)

    starts, calls, ladders = [], [], []
    ctx = {"iteration": 5, "search": {"freeze": []}, "proposer": {"areas": ["limits"]}, "history": []}
    for _ in range(args.starts):
        t = time.perf_counter()
        host = new()
        starts.append((time.perf_counter() - t) * 1000)
        for _ in range(args.calls // args.starts):
            t = time.perf_counter()
            assert host.call("guidance", ctx).ok
            calls.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        step, tree = parse_step(PROMPT_TABU)
        imports_step(tree)
        li = LadderInput(recorded(), {"name": "llm", "takes_guidance": True, "areas": ["prompts", "limits"]},
                         {"favour": [], "freeze": [], "explore_rate": 0.0}, 5, 10, "e/c3", lambda g: g)
        c, state = contract_step(host, li, step.detail["hooks"])
        d = dry_run_step(host, li, step.detail["hooks"], step.detail["functions"], state, c)
        assert c.ok and d.ok
        ladders.append((time.perf_counter() - t) * 1000)
        host.close()
    if backend:
        backend.prune("perf-mechanism-host")
    print(json.dumps({"host": "docker" if backend else "process", "start_ms": round(statistics.median(starts), 1),
                      "call_ms": round(statistics.median(calls), 3),
                      "call_p90_ms": round(sorted(calls)[int(0.9 * len(calls))], 3),
                      "ladder_ms (static + contract + dry run, 4 recorded candidates)": round(statistics.median(ladders), 1),
                      "isolation": host.isolation}))


if __name__ == "__main__":
    main()
