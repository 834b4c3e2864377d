"""SpreadsheetBench's re-run of the agent's script (spreadsheet/evaluate.py `rerun`): when the
evaluator is root, the script runs as nobody and cannot read what root holds (the answers' files,
the evaluator's memory)."""

import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "metaopt" / "benchmarks" / "spreadsheet"))
import evaluate

PROBE = """import os, sys
for p in (sys.argv[3], f"/proc/{os.getppid()}/mem", f"/proc/{os.getppid()}/environ"):
    try:
        open(p, "rb").read(1)
        print("READ", p)
    except OSError as e:
        print("DENIED", p, type(e).__name__)
print("UID", os.getuid())
open(sys.argv[2], "w").write("out")
"""


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"),
                    reason="the demotion happens only when the evaluator is root; nobody needs a system python3")
def test_the_rerun_cannot_read_the_answers(monkeypatch):
    monkeypatch.setenv("SSB_SCRIPT_PYTHON", "/usr/bin/python3")
    root = Path(tempfile.mkdtemp(prefix="ssb-rerun-"))
    try:
        root.chmod(0o755)
        answer = root / "answer.xlsx"
        answer.write_text("the gold values")
        answer.chmod(0o600)
        script = root / "solve.py"
        script.write_text(PROBE.replace("sys.argv[3]", repr(str(answer))))
        script.chmod(0o644)
        out = root / "output" / "2_out.xlsx"
        r = evaluate.rerun(str(script), str(answer), str(out), 30, str(root), demote_to_nobody=True)
        assert r["ok"], r
        assert "UID 65534" in r["log"] and "READ" not in r["log"], r["log"]
        assert r["log"].count("DENIED") == 3 and out.read_text() == "out"
    finally:
        import shutil
        shutil.rmtree(root, ignore_errors=True)
