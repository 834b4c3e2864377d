"""Sandbox overhead on this machine, with a warm image.

    python -m perf.sandbox_overhead [--image IMG] [--n 30]

Prints: per-trial overhead (create, start, one exec of `true`, teardown), a stateless exec of
`true`, a persistent-shell `true` round trip (over 1000 runs), and 4 concurrent trials (each:
start, 20 shell commands, teardown) with their error count. Containers carry a run id of their
own and are pruned at the end, so it is safe on a shared daemon.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from metaopt.sandbox.base import SandboxSpec
from metaopt.sandbox.docker import DockerBackend


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def figure(name: str, samples: list[float], unit: float = 1e3, suffix: str = "ms") -> None:
    s = sorted(samples)
    p90 = s[min(len(s) - 1, int(0.9 * len(s)))]
    print(f"{name:<44} median {statistics.median(s) * unit:8.2f} {suffix}   "
          f"p90 {p90 * unit:8.2f} {suffix}   (n={len(s)})")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", default="metaopt-base:latest")
    ap.add_argument("--n", type=int, default=30)
    args = ap.parse_args(argv)
    backend = DockerBackend()
    spec = SandboxSpec(image=backend.resolve_image(args.image))
    run_id = f"perf-{secrets.token_hex(4)}"
    try:
        def trial() -> None:
            with backend.start(spec, run_id=run_id) as sb:
                sb.exec(["true"])

        api = backend.api

        def raw_trial() -> None:  # the bare SDK calls, as a yardstick for a loaded machine
            cid = api.create_container(spec.image, ["sleep", "infinity"], labels={
                "metaopt.managed": "true", "metaopt.run_id": run_id},
                host_config=api.create_host_config(network_mode="none"))["Id"]
            api.start(cid)
            api.exec_start(api.exec_create(cid, ["true"])["Id"])
            api.remove_container(cid, force=True, v=True)

        trial()  # warm the image and the daemon's caches
        ours, raw = [], []
        for _ in range(args.n):  # interleaved, so both see the same load
            ours += timed(trial, 1)
            raw += timed(raw_trial, 1)
        figure("trial overhead (create+start+exec+remove)", ours)
        figure("  same with bare docker SDK calls", raw)
        with backend.start(spec, run_id=run_id) as sb:
            figure("stateless exec of `true`", timed(lambda: sb.exec(["true"]), args.n))
            sh = sb.shell()
            figure("persistent shell `true` round trip", timed(lambda: sh.run("true"), 1000))

        errors = 0

        def busy_trial(_: int) -> float:
            nonlocal errors
            t0 = time.perf_counter()
            try:
                with backend.start(spec, run_id=run_id) as sb:
                    sh = sb.shell()
                    for i in range(20):
                        if sh.run(f"echo {i} > /tmp/f; cat /tmp/f").stdout != f"{i}\n":
                            errors += 1
            except Exception:  # noqa: BLE001 - counted, this is a measurement
                errors += 1
            return time.perf_counter() - t0

        t0 = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            each = list(pool.map(busy_trial, range(4)))
        wall = time.perf_counter() - t0
        figure("4 concurrent trials: each (20 shell cmds)", each)
        print(f"{'4 concurrent trials: wall':<44} {wall:8.2f} s   errors {errors}")
    finally:
        backend.prune(run_id)


if __name__ == "__main__":
    main()
