"""The in-sandbox verifier (benchmarks/spreadsheet/evaluate.py), run here as the same script
with python3 and openpyxl, and its JSON turned into a Verdict. OJ re-runs, corrupt outputs,
hidden answers, and the result when no recalculation engine is installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import openpyxl
import pytest

from metaopt.benchmarks.spreadsheet.verdict import score_spreadsheet

EVALUATE = Path(__file__).parent.parent / "metaopt" / "benchmarks" / "spreadsheet" / "evaluate.py"
TID = "t-1"
DOUBLE = """import sys, openpyxl
wb = openpyxl.load_workbook(sys.argv[1]); ws = wb["Data"]
for r in range(2, ws.max_row + 1):
    ws[f"B{r}"] = ws[f"A{r}"].value * 2
wb.save(sys.argv[2])
"""


def workbook(path: Path, values: list, doubled: bool) -> None:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Data"
    ws.append(["x", "2x"])
    for v in values:
        ws.append([v, v * 2] if doubled else [v])
    wb.save(path)


@pytest.fixture
def box(tmp_path):
    """An /app-like tree: case k has input [k, k+1, k+2]; answers and hidden inputs in tests/."""
    d = {n: tmp_path / n for n in ("spreadsheets", "output", "answers", "hidden", "logs")}
    for p in d.values():
        p.mkdir()
    for k in (1, 2, 3):
        vals = [k, k + 1, k + 2]
        workbook(d["answers"] / f"{k}_{TID}_answer.xlsx", vals, True)
        workbook((d["spreadsheets"] if k == 1 else d["hidden"]) / f"{k}_{TID}_input.xlsx", vals, False)
    d["root"] = tmp_path
    return d


def run(box, cases=(1, 2, 3), position="Data!B2:B4") -> dict:
    cfg = {"id": TID, "answer_position": position, "cases": list(cases), "answer_dir": str(box["answers"]),
           "hidden_input_dir": str(box["hidden"]), "input_dir": str(box["spreadsheets"]),
           "output_dir": str(box["output"]), "script": str(box["output"] / "solve.py"),
           "script_timeout_s": 30, "workdir": str(box["root"]), "result": str(box["logs"] / "result.json")}
    r = subprocess.run([sys.executable, str(EVALUATE)], env={**os.environ, "SSB_CONFIG": json.dumps(cfg)},
                       capture_output=True, check=False, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    result = json.loads((box["logs"] / "result.json").read_text())
    result["_stdout"] = r.stdout
    return result


def solve(box, source: str = DOUBLE) -> None:
    (box["output"] / "solve.py").write_text(source)
    subprocess.run([sys.executable, str(box["output"] / "solve.py"), str(box["spreadsheets"] / f"1_{TID}_input.xlsx"),
                    str(box["output"] / f"1_{TID}_output.xlsx")], check=True)


def test_a_general_script_passes_every_case_and_answers_are_gone_before_it_reruns(box):
    solve(box)
    res = run(box)
    assert res["soft"] == 1.0 and res["hard"] == 1.0 and [c["passed"] for c in res["cases"]] == [True] * 3
    assert res["cases"][1]["rerun"]["ok"] and (box["output"] / f"3_{TID}_output.xlsx").is_file()
    assert not box["answers"].exists()
    assert res["recalculated"] and res["note"] is None  # no formula anywhere: nothing to recalculate
    v = score_spreadsheet((box["logs"] / "result.json").read_bytes(), res["_stdout"])
    assert (v.score, v.status, v.tests) == (1.0, "passed", {"case_1": "passed", "case_2": "passed", "case_3": "passed"})
    assert v.rewards["soft"] == v.rewards["hard"] == 1.0


@pytest.mark.skipif(bool(shutil.which("soffice") or shutil.which("libreoffice")), reason="LibreOffice is installed here")
def test_without_libreoffice_the_result_says_formulas_were_not_recalculated(box):
    solve(box, DOUBLE.replace('ws[f"A{r}"].value * 2', 'f"=A{r}*2"'))
    res = run(box, cases=(1,))
    assert res["recalculated"] is False and "formulas were not recalculated" in res["note"]
    assert res["cases"][0]["mismatches"][0] == {"cell": "Data!B2", "expected": 2, "actual": None, "formula": "=A2*2"}
    assert "note: no LibreOffice" in res["_stdout"]
    v = score_spreadsheet((box["logs"] / "result.json").read_bytes(), res["_stdout"])
    assert v.rewards["recalculated"] == 0.0 and "not recalculated" in v.error


def test_a_hard_coded_script_fails_the_hidden_cases_with_cell_feedback(box):
    solve(box)
    out1 = box["output"] / f"1_{TID}_output.xlsx"
    (box["output"] / "solve.py").write_text(f"import shutil, sys\nshutil.copyfile({str(out1)!r}, sys.argv[2])\n")
    res = run(box)
    assert [c["passed"] for c in res["cases"]] == [True, False, False]
    assert res["soft"] == pytest.approx(1 / 3) and res["hard"] == 0.0
    assert res["cases"][1]["mismatches"][0] == {"cell": "Data!B2", "expected": 4, "actual": 2}
    assert "Data!B2: expected 4, got 2" in res["_stdout"]
    v = score_spreadsheet((box["logs"] / "result.json").read_bytes(), res["_stdout"])
    assert v.score == pytest.approx(1 / 3) and v.status == "failed" and v.failure_mode == "tests_failed"
    assert v.tests == {"case_1": "passed", "case_2": "failed", "case_3": "failed"}
    assert "case 2: 3 of 3 cells differ" in v.error


def test_a_script_cannot_read_the_answers(box):
    solve(box)
    answers = box["answers"]
    (box["output"] / "solve.py").write_text(
        "import glob, shutil, sys\nk = sys.argv[1].rsplit('/', 1)[1].split('_')[0]\n"
        f"shutil.copyfile(glob.glob({str(answers)!r} + f'/{{k}}_*')[0], sys.argv[2])\n")
    res = run(box)
    assert [c["passed"] for c in res["cases"]] == [True, False, False]  # case 1 came from the agent
    assert "exited 1" in res["cases"][1]["reason"] and "IndexError" in res["cases"][1]["rerun"]["log"]


def test_corrupt_output_scores_zero_with_the_reason_and_the_run_goes_on(box):
    (box["output"] / f"1_{TID}_output.xlsx").write_text("this is not a workbook")
    res = run(box, cases=(1,))
    assert res["soft"] == 0.0 and "not a readable xlsx workbook" in res["cases"][0]["reason"]
    v = score_spreadsheet((box["logs"] / "result.json").read_bytes(), res["_stdout"])
    assert (v.score, v.status, v.failure_mode) == (0.0, "failed", "output_invalid")
    assert "not a readable xlsx" in v.error


def test_missing_output_and_missing_script_fail_their_cases(box):
    res = run(box)
    assert res["soft"] == 0.0
    assert "is missing" in res["cases"][0]["reason"]
    assert "no " in res["cases"][1]["reason"] and "solve.py to re-run" in res["cases"][1]["reason"]


def test_broken_task_is_a_scorer_error_not_a_zero(box):
    solve(box)
    (box["answers"] / f"2_{TID}_answer.xlsx").unlink()
    res = run(box)
    assert "answer file for case 2 is missing" in res["error"]
    v = score_spreadsheet((box["logs"] / "result.json").read_bytes(), res["_stdout"])
    assert v.score is None and v.status == "error" and v.failure_mode == "scorer_error"


def test_no_result_file_is_an_error():
    v = score_spreadsheet(None, "Traceback ...\nModuleNotFoundError: No module named 'openpyxl'")
    assert v.score is None and v.status == "error" and "openpyxl" in v.error
