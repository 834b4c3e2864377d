"""SpreadsheetBench end to end through `metaopt eval`: real images (LibreOffice inside), real
containers, the in-sandbox scorer. The first run builds the shared image layers (about a minute)."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import pytest
import yaml
from _docker_fixtures import metaopt

pytestmark = pytest.mark.usefixtures("docker_image")


@pytest.fixture(scope="module", autouse=True)
def _docker(docker_image):
    """Docker and the base image, for every test that uses this."""


PACKAGED = Path(__file__).parents[1] / "metaopt" / "benchmarks" / "samples" / "spreadsheetbench"
FAKE_TASKS = "line-totals,due-dates,filter-high,rename-total"  # formulas, dates, new sheet, one case


def run_eval(tmp_path, *args: str) -> dict:
    r = metaopt("eval", *args, "--concurrency", "3", "--db", str(tmp_path / "m.duckdb"), "--json", timeout=1500)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def scores(result: dict) -> dict[str, float | None]:
    return {t["task_id"]: t["score"] for t in result["tasks"]}


@pytest.mark.timeout(1800)  # a cold cache builds the shared LibreOffice layer and 12 task images
def test_oracle_scores_every_sample_task_1_and_nop_0(tmp_path):
    oracle = run_eval(tmp_path, "--benchmark", "spreadsheetbench-sample", "--agent", "oracle")
    assert len(oracle["tasks"]) >= 10 and set(scores(oracle).values()) == {1.0}, oracle
    # the image has LibreOffice: every trial's formulas were recalculated (line-totals needs it)
    rows = metaopt("traces", "sql", "SELECT rewards FROM trials", "--db", str(tmp_path / "m.duckdb"), "--json", timeout=120)
    rewards = [json.loads(r["rewards"]) if isinstance(r["rewards"], str) else r["rewards"] for r in json.loads(rows.stdout)]
    assert len(rewards) == len(oracle["tasks"]) and all(r["recalculated"] == 1.0 for r in rewards), rewards
    # nop on four tasks keeps this short; make_samples already refuses a case whose input passes
    nop = run_eval(tmp_path, "--benchmark", "spreadsheetbench-sample", "--agent", "nop", "--tasks", FAKE_TASKS)
    assert scores(nop) == dict.fromkeys(FAKE_TASKS.split(","), 0.0), nop
    assert {t["status"] for t in nop["tasks"]} == {"failed"}


def test_fake_solution_through_the_spreadsheet_harness_scores_1(tmp_path):
    res = run_eval(tmp_path, "--benchmark", "spreadsheetbench-sample", "--tasks", FAKE_TASKS,
                   "--harness", "spreadsheet", "--model", "fake/solution")
    assert scores(res) == dict.fromkeys(FAKE_TASKS.split(","), 1.0), res


def test_spreadsheet_tools_work_inside_the_sandbox(tmp_path):
    """inspect_workbook and write_cells run with Debian's openpyxl in the image; a write through
    write_cells alone solves fill-blanks (blank counts in B2, B5, B8 become 0)."""
    script = tmp_path / "steps.yaml"
    script.write_text(yaml.safe_dump([
        {"tool": "inspect_workbook", "arguments": {"path": "/app/spreadsheets/1_fill-blanks_input.xlsx"}},
        {"tool": "write_cells", "arguments": {"path": "/app/spreadsheets/1_fill-blanks_input.xlsx",
                                              "output": "/app/output/1_fill-blanks_output.xlsx",
                                              "cells": {"B2": 0, "B5": 0, "B8": 0, "D1": "=SUM(B2:B10)"}}},
        {"tool": "inspect_workbook", "arguments": {"path": "/app/output/1_fill-blanks_output.xlsx",
                                                   "range": "D1", "recalculate": True}},
        {"tool": "finish", "arguments": {"summary": "filled"}},
        {"tool": "finish", "arguments": {"summary": "checked"}},
    ]))
    res = run_eval(tmp_path, "--benchmark", "spreadsheetbench-sample", "--tasks", "fill-blanks",
                   "--harness", "spreadsheet", "--model", f"fake/script:{script}")
    assert scores(res) == {"fill-blanks": 1.0}, res
    shown = metaopt("traces", "sql", "SELECT text FROM messages WHERE part_type = 'tool_call_response'",
                    "--db", str(tmp_path / "m.duckdb"), "--json", timeout=120)
    assert "used range A1:B10" in shown.stdout and "Stock!B5: None -> 0" in shown.stdout, shown.stdout[-2000:]
    total = sum(c.value or 0 for c in openpyxl.load_workbook(
        PACKAGED / "spreadsheet/fill-blanks/initial.xlsx").active["B"][1:])
    assert "recalculated by LibreOffice" in shown.stdout and f"D1 = =SUM(B2:B10)   (value: {total})" in shown.stdout


def test_upstream_layout_oracle_passes_and_a_corrupt_output_scores_0_with_its_reason(tmp_path):
    root = tmp_path / "ds"
    for k in (1, 2):
        for kind, v in (("input", None), ("answer", 10 * k)):
            wb = openpyxl.Workbook()
            wb.active.title = "Sheet1"
            wb.active["A1"], wb.active["B1"] = 5 * k, v
            (root / "spreadsheet" / "77-1").mkdir(parents=True, exist_ok=True)
            wb.save(root / "spreadsheet" / "77-1" / f"{k}_77-1_{kind}.xlsx")
    (root / "dataset.json").write_text(json.dumps([{"id": "77-1", "instruction": "Double A1 into B1.",
                                                    "spreadsheet_path": "spreadsheet/77-1",
                                                    "instruction_type": "Cell-Level Manipulation",
                                                    "answer_position": "B1"}]))
    oracle = run_eval(tmp_path, "--benchmark", "spreadsheetbench", "--dataset", str(root), "--agent", "oracle")
    assert scores(oracle) == {"77-1": 1.0}, oracle
    script = tmp_path / "junk.yaml"
    script.write_text(yaml.safe_dump([{"tool": "bash", "arguments": {
        "command": "mkdir -p /app/output && echo junk > /app/output/1_77-1_output.xlsx"}}]))
    bad = run_eval(tmp_path, "--benchmark", "spreadsheetbench", "--dataset", str(root), "--harness", "spreadsheet",
                   "--model", f"fake/script:{script}")
    [row] = bad["tasks"]
    assert (row["score"], row["status"]) == (0.0, "failed"), row
    assert "not a readable xlsx" in row["error"] and "no /app/output/solve.py" in row["error"]
