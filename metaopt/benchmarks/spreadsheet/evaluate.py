"""SpreadsheetBench verifier, run inside the sandbox as root after the agent stops:
`python3 /tests/evaluate.py` with the task's settings as JSON in $SSB_CONFIG.

Sequence (benchmark-formats.md 3.2-3.3):
1. Recalculate the answer workbooks (LibreOffice headless, when `soffice` is in the image), load
   their values into memory, then delete every answer file, so the agent's code re-run in step 2
   can never read them.
2. OJ-style: cases 2..n are produced by re-running the agent's script
   (`python3 <script> <input> <output>`) on inputs it never saw, as user nobody (the evaluator
   is root: /tests is made root-only first, the answers live in root's memory, the result JSON
   in root's directory; the script cannot read or write any of them). After each run every process
   that was not there when this script started is stopped and killed: the agent's script must
   not leave a daemon that rewrites the result JSON after step 3 wrote it.
3. Recalculate the outputs, compare each case on answer_position (compare.py), and write the
   result JSON: soft (share of cases passed), hard (all passed), per-case pass/fail with reasons
   and per-cell mismatches. A human-readable report goes to stdout.

Output problems (missing, not an xlsx, sheet absent) fail that case; task problems (answer
unreadable, bad answer_position, empty range) give {"error": ...} and no score.
Standard library + openpyxl only.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare
import openpyxl

RECALC_TIMEOUT_S = 120
NOBODY = 65534
"""The agent's script is re-run as this uid/gid (when the evaluator is root): it cannot read the
evaluator's memory (the answers' values), /tests, or write the result JSON."""


def soffice() -> str | None:
    return shutil.which("soffice") or shutil.which("libreoffice")


def has_formula(path: str) -> bool:
    """Whether any cell holds a formula. Never raises (an unreadable file: True, let LibreOffice try)."""
    try:
        wb = openpyxl.load_workbook(path)
    except Exception:  # noqa: BLE001
        return True
    return any(c.data_type == "f" for ws in wb.worksheets for row in ws.iter_rows() for c in row)


def recalculate(paths: list[str], workdir: str) -> tuple[dict[str, str], str | None]:
    """Recalculated copies of the `paths` that hold formulas (original path -> copy); a file
    without formulas needs none (its values are final), one LibreOffice could not convert is
    left out. Returns ({}, note) when formulas need an engine and none is installed."""
    paths = [p for p in paths if has_formula(p)]  # LibreOffice starts take seconds: skip when idle
    if not paths:
        return {}, None
    exe = soffice()
    if exe is None:
        return {}, "no LibreOffice in the sandbox image: formulas were not recalculated, cells compare by their cached values"
    # One LibreOffice start for all files: their basenames are unique ({k}_{id}_answer/output).
    src_dir, dest = os.path.join(workdir, "in"), os.path.join(workdir, "out")
    os.makedirs(src_dir)
    srcs = []
    for p in paths:
        srcs.append(os.path.join(src_dir, os.path.basename(p)))
        shutil.copyfile(p, srcs[-1])
    note = None
    cmd = [exe, f"-env:UserInstallation=file://{workdir}/profile", "--headless", "--calc",
           "--convert-to", "xlsx:Calc MS Excel 2007 XML", "--outdir", dest, *srcs]
    try:
        subprocess.run(cmd, capture_output=True, timeout=RECALC_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        note = f"LibreOffice ran past {RECALC_TIMEOUT_S} s; files it had not converted compare by their cached values"
    out = {p: os.path.join(dest, os.path.basename(p)) for p in paths}
    out = {p: q for p, q in out.items() if os.path.isfile(q)}
    if missed := [os.path.basename(p) for p in paths if p not in out]:
        note = note or f"LibreOffice could not recalculate {', '.join(missed)}; their cached values were used"
    return out, note


def rerun(script: str, src: str, dest: str, timeout: float, cwd: str, demote_to_nobody: bool = False) -> dict:
    """Run the agent's script on one unseen input. Never raises."""
    if not os.path.isfile(script):
        return {"ok": False, "reason": f"no {script} to re-run on this case (the task asked for one)"}
    if os.path.exists(dest):
        os.remove(dest)  # only a fresh run counts
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    demote: dict = {}
    if demote_to_nobody and os.geteuid() == 0:  # the agent's code never runs as the user who holds the answers
        os.chown(os.path.dirname(dest), NOBODY, NOBODY)
        demote = {"user": NOBODY, "group": NOBODY, "extra_groups": [], "env": {**os.environ, "HOME": "/tmp"}}
    try:
        # Under the locked toolchain (evaluation.runners) the agent's script keeps the agent's python3.
        python = shutil.which(os.environ.get("SSB_SCRIPT_PYTHON", "")) or sys.executable
        r = subprocess.run([python, script, src, dest], capture_output=True, text=True,
                           timeout=timeout, cwd=cwd, check=False, **demote)
    except subprocess.TimeoutExpired:
        return {"ok": False, "reason": f"{script} ran past {timeout:.0f} s"}
    except OSError as e:  # e.g. an interpreter user nobody may not run
        return {"ok": False, "reason": f"cannot run {script}: {e}"}
    tail = (r.stdout + r.stderr)[-2000:]
    if r.returncode != 0:
        return {"ok": False, "reason": f"{script} exited {r.returncode}", "log": tail}
    return {"ok": True, "log": tail}


def _pids() -> set[int]:
    return {int(d) for d in os.listdir("/proc") if d.isdigit()}


def sweep(keep: set[int]) -> int:
    """Stop (until no new one appears), then kill, every process but this one and those in `keep`:
    whatever the agent's script left running. Returns how many."""
    me, stopped = os.getpid(), set()
    for _ in range(200):
        new = _pids() - keep - stopped - {me}
        if not new:
            break
        for pid in new:
            try:
                os.kill(pid, signal.SIGSTOP)
            except (ProcessLookupError, PermissionError):
                pass
            stopped.add(pid)
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return len(stopped)


def evaluate(cfg: dict) -> dict:
    before = _pids()  # PID 1, the container's main process, this exec: the agent's are gone already
    tid = cfg["id"]
    areas = compare.parse_answer_position(cfg["answer_position"])
    cases = cfg["cases"]
    work = tempfile.mkdtemp(prefix="ssb-")
    answers = {k: os.path.join(cfg["answer_dir"], f"{k}_{tid}_answer.xlsx") for k in cases}
    if cfg.get("demote") and os.geteuid() == 0:  # in the sandbox: the hidden inputs and answers are root's only
        os.chmod(os.path.dirname(cfg["answer_dir"].rstrip("/")) or "/", 0o700)
    for k, p in answers.items():
        if not os.path.isfile(p):
            raise compare.ScorerError(f"answer file for case {k} is missing: {p}")
    recalced, note = recalculate(list(answers.values()), os.path.join(work, "answers"))
    gold, gold_formulas = {}, {}
    for k, p in answers.items():
        try:
            gold[k] = compare.load_values(recalced.get(p, p))
            if p not in recalced:  # to refuse formulas whose value nobody computed
                gold_formulas[k] = openpyxl.load_workbook(p)
        except Exception as e:  # noqa: BLE001 - any openpyxl failure means the task is broken
            raise compare.ScorerError(f"answer workbook for case {k} is unreadable: {type(e).__name__}: {e}") from None
    shutil.rmtree(cfg["answer_dir"], ignore_errors=True)
    shutil.rmtree(os.path.join(work, "answers"), ignore_errors=True)

    outputs = {k: os.path.join(cfg["output_dir"], f"{k}_{tid}_output.xlsx") for k in cases}
    reruns = {}
    for k in cases:
        if k == cases[0]:
            continue
        src = os.path.join(cfg["input_dir"], f"{k}_{tid}_input.xlsx")
        shutil.copyfile(os.path.join(cfg["hidden_input_dir"], f"{k}_{tid}_input.xlsx"), src)
        reruns[k] = rerun(cfg["script"], src, outputs[k], cfg.get("script_timeout_s", 120), cfg["workdir"],
                          demote_to_nobody=bool(cfg.get("demote")))
        if cfg.get("sweep") and (left := sweep(before)):  # in the sandbox only: never on a host
            reruns[k]["left_running"] = left

    results, valid = {}, []
    for k in cases:
        p = outputs[k]
        if k in reruns and not reruns[k]["ok"]:
            results[k] = {"passed": False, "no_output": True, "reason": reruns[k]["reason"]}
        elif not os.path.isfile(p):
            results[k] = {"passed": False, "no_output": True, "reason": f"output file {p} is missing"}
        else:
            try:
                compare.load_values(p)
                valid.append(k)
            except Exception as e:  # noqa: BLE001 - a corrupt agent output scores 0, with the reason
                results[k] = {"passed": False, "no_output": True, "reason": f"output {p} is not a readable xlsx workbook ({type(e).__name__}: {e})"}
    recalced_out, note_out = recalculate([outputs[k] for k in valid], os.path.join(work, "outputs"))
    note = note or note_out
    for k in valid:
        p = outputs[k]
        results[k] = compare.compare(gold[k], compare.load_values(recalced_out.get(p, p)), areas,
                                     formulas_wb=openpyxl.load_workbook(p), answer_formulas_wb=gold_formulas.get(k))
    cases_out = []
    for k in cases:
        row = {"case": k, **results[k]}
        if k in reruns:
            row["rerun"] = reruns[k]
        cases_out.append(row)
    passed = sum(1 for c in cases_out if c["passed"])
    shutil.rmtree(work, ignore_errors=True)
    return {"version": 1, "task_id": tid, "recalculated": note is None,
            "note": note, "soft": passed / len(cases), "hard": float(passed == len(cases)),
            "cases": cases_out, "error": None}


def report(result: dict) -> str:
    if result.get("error"):
        return f"scorer error: {result['error']}"
    lines = [(f"SpreadsheetBench {result['task_id']}: soft {result['soft']:.3f} hard {result['hard']:.0f} "
             f"(recalculated: {'yes' if result['recalculated'] else 'no'})")]
    if result.get("note"):
        lines.append(f"note: {result['note']}")
    for c in result["cases"]:
        lines.append(f"case {c['case']}: {'PASSED' if c['passed'] else 'FAILED'}" + (f" - {c['reason']}" if c.get("reason") else ""))
        for m in c.get("mismatches", []):
            extra = f" (formula {m['formula']})" if "formula" in m else ""
            lines.append(f"  {m['cell']}: expected {m['expected']!r}, got {m['actual']!r}{extra}")
        if c.get("rerun", {}).get("log") and not c["passed"]:
            lines.append("  re-run log tail: " + c["rerun"]["log"][-500:].replace("\n", "\n    "))
    return "\n".join(lines)


def main() -> int:
    cfg = json.loads(os.environ["SSB_CONFIG"])
    try:
        result = evaluate(cfg)
    except (compare.ScorerError, compare.AnswerPositionError, OSError) as e:
        result = {"version": 1, "task_id": cfg.get("id"), "error": str(e)}
    os.makedirs(os.path.dirname(cfg["result"]), exist_ok=True)
    with open(cfg["result"], "w") as f:
        json.dump(result, f)
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
