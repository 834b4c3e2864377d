"""What the verify-time integrity steps cost per trial (evaluation/integrity.py): tamper scan,
static toolchain, stopping the agent's processes, recreating directories, checking the copied
tests, the pristine re-check when one ran.

Runs `metaopt eval --agent oracle` (and optionally nop) on a benchmark's sample tasks through the
real CLI and reads every trial's `integrity` record back from the store. Prints one JSON object:
per agent, trials, median / p90 / max of the integrity seconds, of the tamper scan alone, of the
whole verifier phase, the share of the verifier phase the integrity steps took, and how many
pristine re-checks ran. `--compare` runs each agent three times, one after the other, in one run:
`in-place` (the verifier in the agent's container, as before isolation), `partial` (a fresh
container, sandbox.docker_fork, with the task's own toolchain: before the locked toolchain) and as
shipped (`isolated`: recognised runners on the locked toolchain, evaluation.runners), with the
per-task differences of the verifier phase.

    python -m perf.integrity_overhead [--benchmark terminalbench-sample] [--agents oracle,nop] [-j 2] [--compare [--isolated-first]]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from metaopt.evaluation import TrialResult
from metaopt.traces.store import Store


def _q(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3)


def summarize(rows: list[TrialResult]) -> dict:
    integ = [r.integrity or {} for r in rows]
    seconds = [i.get("seconds") for i in integ if i.get("seconds") is not None]
    scan = [i["scan"]["seconds"] for i in integ if i.get("scan")]
    verify = [r.verifier_duration_s for r in rows if r.verifier_duration_s]
    return {
        "trials": len(rows),
        "integrity_s": {"median": _q(seconds, 0.5), "p90": _q(seconds, 0.9), "max": _q(seconds, 1.0)},
        "scan_s": {"median": _q(scan, 0.5), "p90": _q(scan, 0.9)},
        "verifier_phase_s": {"median": _q(verify, 0.5), "p90": _q(verify, 0.9)},
        "integrity_share_of_verifier_phase": round(sum(seconds) / sum(verify), 3) if verify and seconds else None,
        "changed_paths_median": _q([i["scan"]["changes"] for i in integ if i.get("scan")], 0.5),
        "pristine_rechecks": sum(1 for i in integ if i.get("pristine")),
        "fork_s": {"median": _q([i["fork"]["capture_s"] + i["fork"]["start_s"] for i in integ if i.get("fork")], 0.5)},
        "statuses": {s: sum(r.status == s for r in rows) for s in sorted({r.status for r in rows})},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmark", default="terminalbench-sample")
    ap.add_argument("--agents", default="oracle,nop")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--compare", action="store_true", help="also run the verifier in place (before isolation), first")
    ap.add_argument("--isolated-first", action="store_true", help="with --compare: the isolated run first")
    args = ap.parse_args()
    out: dict = {"benchmark": args.benchmark, "concurrency": args.j}
    modes = ["in-place", "partial", "isolated"] if args.compare else ["isolated"]
    if args.isolated_first:
        modes.reverse()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "perf.duckdb"
        for agent in args.agents.split(","):
            rows = {}
            for mode in modes:
                cli = [sys.executable, "-c", PATCHED[mode]] if mode in PATCHED else [sys.executable, "-m", "metaopt.cli"]
                r = subprocess.run([*cli, "eval", "--benchmark", args.benchmark,
                                    "--agent", agent, "-j", str(args.j), "--db", str(db), "--json"],
                                   capture_output=True, check=False, text=True)
                if r.returncode != 0:
                    sys.exit(f"metaopt eval failed: {r.stderr.strip()[-500:]}")
                run_id = json.loads(r.stdout)["run_id"]
                with Store(db, read_only=True) as s:
                    rows[mode] = s.select(TrialResult, "run_id = ?", [run_id])
                out[agent if len(modes) == 1 else f"{agent} {mode}"] = summarize(rows[mode])
            for base in [m for m in ("in-place", "partial") if m in rows]:
                before = {r.task_id: r.verifier_duration_s for r in rows[base]}
                diff = [r.verifier_duration_s - before[r.task_id] for r in rows["isolated"]
                        if r.verifier_duration_s and before.get(r.task_id)]
                out[f"{agent} isolated minus {base}"] = {"verifier_phase_s": {"median": _q(diff, 0.5), "p90": _q(diff, 0.9)}}
    print(json.dumps(out, indent=1))


RUN = "from metaopt.cli import main; sys.argv = ['metaopt', *sys.argv[1:]]; main()"
PATCHED = {"in-place": "import sys; import metaopt.evaluation.integrity as i; i.ISOLATED.clear(); " + RUN,
           "partial": "import sys; import metaopt.evaluation.runners as r; r.recognise = lambda task: None; " + RUN}


if __name__ == "__main__":
    main()
