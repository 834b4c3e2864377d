"""The host side of SpreadsheetBench scoring: the verifier's result JSON becomes a Verdict.

The trial's score is the soft score (share of test cases passed: the 912 set's Pass@1 counts
cases); status is `passed` only when every case passed (the hard score). Both are kept in
`rewards` ({soft, hard, recalculated}: recalculated is 0.0 when some formula could not be
recalculated), per-case pass/fail in `tests`. A scorer error (broken task) or a missing result
is an error with no score; a corrupt or missing agent output is a failed case with its reason
in `error`, never an error row.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from metaopt.benchmarks.scoring import Verdict

if TYPE_CHECKING:
    from metaopt.benchmarks.scorers import Verification, VerifyContext
    from metaopt.benchmarks.task import Task
    from metaopt.sandbox.base import Sandbox


def verify_spreadsheet(task: Task, sb: Sandbox, ctx: VerifyContext) -> Verification:
    """The `spreadsheet` scorer: run evaluate.py in the sandbox, score the result JSON it wrote."""
    from metaopt.benchmarks.scorers import Verification, read_small, run_verifier

    run = run_verifier(task, sb, ctx)
    if isinstance(run, Verification):
        return run
    output, code = run
    data, problem = read_small(sb, "/logs/verifier/spreadsheet.json", limit=8 << 20)
    return Verification(score_spreadsheet(data, output + (f"\n{problem}" if problem else "")), output, code)


def score_spreadsheet(result_json: bytes | None, output: str) -> Verdict:
    if result_json is None:
        tail = output.strip().splitlines()[-1:] or ["no output"]
        return Verdict(None, "error", failure_mode="scorer_error",
                       error=f"spreadsheet verifier wrote no result ({tail[0][:300]})")
    try:
        res = json.loads(result_json)
        if not isinstance(res, dict):
            raise ValueError("not an object")  # noqa: TRY004 - caught just below with the other malformed-result errors
        if res.get("error"):
            return Verdict(None, "error", failure_mode="scorer_error", error=f"spreadsheet scorer: {res['error']}")
        cases = res["cases"]
        soft, hard = float(res["soft"]), float(res["hard"])
        tests = {f"case_{c['case']}": "passed" if c["passed"] else "failed" for c in cases}
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        return Verdict(None, "error", failure_mode="scorer_error", error=f"unreadable spreadsheet result: {e}")
    rewards = {"soft": soft, "hard": hard, "recalculated": 1.0 if res.get("recalculated") else 0.0}
    notes = [f"case {c['case']}: {c['reason']}" for c in cases if not c["passed"] and c.get("reason")]
    if res.get("note"):
        notes.append(res["note"])
    if hard >= 1.0:
        mode = None
    elif any(c.get("no_output") for c in cases):
        mode = "output_invalid"  # missing, unreadable, or the re-run script failed
    else:
        mode = "tests_failed"
    return Verdict(soft, "passed" if hard >= 1.0 else "failed", tests, failure_mode=mode,
                   error="; ".join(notes)[:2000] or None, rewards=rewards)
