"""What the verify-time integrity steps cost per trial (evaluation/integrity.py): tamper scan,
static toolchain, stopping the agent's processes, recreating directories, checking the copied
tests, the pristine re-check when one ran.

Runs `metaopt eval --agent oracle` (and optionally nop) on a benchmark's sample tasks through the
real CLI and reads every trial's `integrity` record back from the store. Prints one JSON object:
per agent, trials, median / p90 / max of the integrity seconds, of the tamper scan alone, of the
whole verifier phase, the share of the verifier phase the integrity steps took, and how many
pristine re-checks ran.

    python -m perf.integrity_overhead [--benchmark terminalbench-sample] [--agents oracle,nop] [-j 2]
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
        "statuses": {s: sum(r.status == s for r in rows) for s in sorted({r.status for r in rows})},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmark", default="terminalbench-sample")
    ap.add_argument("--agents", default="oracle,nop")
    ap.add_argument("-j", type=int, default=2)
    args = ap.parse_args()
    out: dict = {"benchmark": args.benchmark, "concurrency": args.j}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "perf.duckdb"
        for agent in args.agents.split(","):
            r = subprocess.run([sys.executable, "-m", "metaopt.cli", "eval", "--benchmark", args.benchmark,
                                "--agent", agent, "-j", str(args.j), "--db", str(db), "--json"],
                               capture_output=True, check=False, text=True)
            if r.returncode != 0:
                sys.exit(f"metaopt eval failed: {r.stderr.strip()[-500:]}")
            run_id = json.loads(r.stdout)["run_id"]
            with Store(db, read_only=True) as s:
                out[agent] = summarize(s.select(TrialResult, "run_id = ?", [run_id]))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
