"""Loading SpreadsheetBench dataset.json layouts (912 v0.1 and Verified 400) and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import pytest
from _docker_fixtures import metaopt

from metaopt.benchmarks.registry import BenchmarkError, load_benchmark
from metaopt.benchmarks.task import Task, TaskLoadError

PACKAGED = Path(__file__).parents[1] / "metaopt" / "benchmarks" / "samples" / "spreadsheetbench"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METAOPT_CACHE_DIR", str(tmp_path / "cache"))


def xlsx(path: Path, value: object = 1) -> Path:
    wb = openpyxl.Workbook()
    wb.active["A1"] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    wb.save(path)
    return path


def dataset(root: Path, records: list[dict], files: dict[str, list[str]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "dataset.json").write_text(json.dumps(records))
    for folder, names in files.items():
        for i, name in enumerate(names):
            xlsx(root / "spreadsheet" / folder / name, i)
    return root


def rec(tid, pos="Sheet!A1:B2", **extra):
    return {"id": tid, "instruction": f"do {tid}", "spreadsheet_path": f"spreadsheet/{tid}",
            "instruction_type": "Cell-Level Manipulation", "answer_position": pos, **extra}


def test_912_layout_three_cases_one_visible_two_hidden(tmp_path):
    root = dataset(tmp_path / "ds", [rec(32438)], {"32438": [f"{n}_32438_{kind}.xlsx" for n in (1, 2, 3)
                                                               for kind in ("input", "answer")]})
    [task] = load_benchmark("spreadsheetbench", root)
    assert isinstance(task, Task) and task.id == "32438" and task.scoring == "spreadsheet"
    assert task.metadata["num_test_cases"] == 3 and task.workdir == "/app"
    assert "/app/spreadsheets/1_32438_input.xlsx" in task.instruction
    assert "/app/output/1_32438_output.xlsx" in task.instruction and "/app/output/solve.py" in task.instruction
    dests = {d for _, d in task.verifier.files}
    assert {"/tests/answers/1_32438_answer.xlsx", "/tests/answers/3_32438_answer.xlsx",
            "/tests/inputs/2_32438_input.xlsx", "/tests/inputs/3_32438_input.xlsx"} <= dests
    assert "/tests/inputs/1_32438_input.xlsx" not in dests  # case 1 is in the image
    # the build context holds the recipe and the case-1 input only: never an answer
    ctx = task.environment.context_dir
    assert sorted(p.name for p in ctx.iterdir()) == ["Dockerfile", "input.xlsx"]
    assert 'COPY ["input.xlsx", "/app/spreadsheets/1_32438_input.xlsx"]' in (ctx / "Dockerfile").read_text()
    assert (ctx / "input.xlsx").read_bytes() == (root / "spreadsheet/32438/1_32438_input.xlsx").read_bytes()
    # upstream data has no solution script: the oracle copies answers (as Harbor's adapter)
    assert ("/oracle/answers/2_32438_answer.xlsx" in {d for _, d in task.solution.files})


def test_verified_layout_all_three_naming_variants(tmp_path):
    root = dataset(tmp_path / "ds", [rec("v-1"), rec("v-2"), rec("v-3")], {
        "v-1": ["1_v-1_init.xlsx", "1_v-1_golden.xlsx"],
        "v-2": ["initial.xlsx", "golden.xlsx"],
        "v-3": ["1_other-id_init.xlsx", "1_other-id_golden.xlsx"],  # the mismatched-id folder
    })
    tasks = load_benchmark("spreadsheetbench", root)
    assert [t.id for t in tasks] == ["v-1", "v-2", "v-3"]
    for t in tasks:
        assert isinstance(t, Task), t
        assert t.metadata["num_test_cases"] == 1 and "solve.py" not in t.instruction
        assert [d for _, d in t.verifier.files if d.startswith("/tests/answers")] == [f"/tests/answers/1_{t.id}_answer.xlsx"]


def test_the_packaged_sample_loads_with_solutions_and_several_cases():
    tasks = load_benchmark("spreadsheetbench-sample")
    assert len(tasks) >= 10 and all(isinstance(t, Task) for t in tasks)
    assert all(t.solution and t.solution.files[0][0].name == "solution.py" for t in tasks)
    assert sum(t.metadata["num_test_cases"] == 3 for t in tasks) >= 8
    assert {"Cell-Level Manipulation", "Sheet-Level Manipulation"} <= {t.metadata["instruction_type"] for t in tasks}


def test_bad_records_become_error_rows_naming_task_and_cause(tmp_path):
    root = dataset(tmp_path / "ds", [
        rec("ok"),
        rec("bad-pos", pos="Sheet!A1:"),
        rec("no-folder"),
        rec("no-answer"),
        rec("case2-orphan"),
        rec("corrupt"),
        {"id": "no-instruction", "answer_position": "A1"},
    ], {
        "ok": ["1_ok_input.xlsx", "1_ok_answer.xlsx"],
        "bad-pos": ["1_bad-pos_input.xlsx", "1_bad-pos_answer.xlsx"],
        "no-answer": ["1_no-answer_input.xlsx"],
        "case2-orphan": ["1_case2-orphan_input.xlsx", "1_case2-orphan_answer.xlsx", "2_case2-orphan_input.xlsx"],
        "corrupt": ["1_corrupt_input.xlsx", "1_corrupt_answer.xlsx"],
    })
    (root / "spreadsheet/corrupt/1_corrupt_answer.xlsx").write_text("not a workbook")
    by_id = {t.id: t for t in load_benchmark("spreadsheetbench", root)}
    assert isinstance(by_id["ok"], Task)
    errors = {k: v.error for k, v in by_id.items() if isinstance(v, TaskLoadError)}
    assert "answer_position" in errors["bad-pos"] and "'A1:'" in errors["bad-pos"]
    assert "folder" in errors["no-folder"] and "missing" in errors["no-folder"]
    assert "no case-1 workbooks" in errors["no-answer"]
    assert "case 2 has an input workbook but no answer" in errors["case2-orphan"]
    assert "missing required field 'instruction'" in errors["no-instruction"]
    assert "1_corrupt_answer.xlsx is not an xlsx workbook" in errors["corrupt"]
    assert all(k in v for k, v in errors.items())  # each names its task


def test_dataset_json_that_is_not_a_list_is_bad_input(tmp_path):
    (tmp_path / "dataset.json").write_text('{"id": 1}')
    with pytest.raises(BenchmarkError, match="must be a JSON list"):
        load_benchmark("spreadsheetbench", tmp_path)
    r = metaopt("eval", "--benchmark", "spreadsheetbench", "--dataset", str(tmp_path), "--agent", "nop",
                "--db", str(tmp_path / "x.duckdb"), timeout=120)
    assert r.returncode == 2 and "dataset.json" in r.stderr and "JSON list" in r.stderr


def test_spreadsheetbench_needs_a_dataset():
    with pytest.raises(BenchmarkError, match="needs --dataset"):
        load_benchmark("spreadsheetbench")


def test_the_packaged_sample_is_what_make_samples_builds(tmp_path, monkeypatch):
    """make_samples also refuses a case whose input already passes (no vacuous task)."""
    from metaopt.benchmarks.spreadsheet import make_samples

    monkeypatch.setattr(make_samples, "OUT", tmp_path / "built")
    make_samples.main()
    built = {p.relative_to(tmp_path / "built"): p.read_bytes() for p in (tmp_path / "built").rglob("*") if p.is_file()}
    shipped = {p.relative_to(PACKAGED): p.read_bytes() for p in PACKAGED.rglob("*") if p.is_file()}
    assert built.keys() == shipped.keys()
    assert [str(k) for k in built if built[k] != shipped[k]] == []


def test_known_bad_upstream_tasks_are_reported_not_run(tmp_path):
    files = {tid: [f"1_{tid}_input.xlsx", f"1_{tid}_answer.xlsx"] for tid in ("118-50", "7-5")}
    root = dataset(tmp_path / "ds", [rec("118-50"), rec("7-5")], files)
    bad, good = load_benchmark("spreadsheetbench", root)
    assert isinstance(bad, TaskLoadError) and bad.id == "118-50" and "issue #34" in bad.error
    assert isinstance(good, Task) and good.id == "7-5"
