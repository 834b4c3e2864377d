"""The spreadsheet harness's tools (inspect_workbook, write_cells): the exact scripts from
harnesses/spreadsheet/harness.yaml, run with python3 and their arguments as JSON on stdin, as
the task agent runs them inside the sandbox."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import openpyxl
import pytest

from metaopt.task_agent.harness_io import load_harness, resolve_harness


@pytest.fixture(scope="module")
def tools():
    h = load_harness(resolve_harness("spreadsheet"))
    return {t.name: t for t in h.tools}


def call(tools, name: str, tmp_path, **args) -> tuple[int, str]:
    script = tmp_path / f"{name}.py"
    script.write_text(tools[name].script)
    r = subprocess.run([sys.executable, str(script)], input=json.dumps(args), capture_output=True, check=False, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


@pytest.fixture
def book(tmp_path):
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Orders"
    ws.append(["Item", "Qty", "Price", "Total"])
    ws.append(["a", 2, 3.5, "=B2*C2"])
    wb.create_sheet("Notes")["A1"] = "hello"
    path = tmp_path / "in.xlsx"
    wb.save(path)
    return path


def test_inspect_lists_sheets_ranges_values_and_formulas(tools, tmp_path, book):
    rc, out = call(tools, "inspect_workbook", tmp_path, path=str(book))
    assert rc == 0, out
    assert "2 sheet(s)" in out and "'Orders': used range A1:D2" in out and "'Notes'" in out
    assert "B2 = 2" in out and "A1 = 'Item'" in out
    assert "D2 = =B2*C2   (value: None)" in out
    rc, out = call(tools, "inspect_workbook", tmp_path, path=str(book), sheet="Orders", range="C1:C2")
    assert "C2 = 3.5" in out and "B2" not in out.split("cells of")[1]


@pytest.mark.skipif(bool(shutil.which("soffice") or shutil.which("libreoffice")), reason="LibreOffice is installed here")
def test_inspect_says_when_it_cannot_recalculate(tools, tmp_path, book):
    rc, out = call(tools, "inspect_workbook", tmp_path, path=str(book), recalculate=True)
    assert rc == 0 and "LibreOffice is not installed" in out and "D2 = =B2*C2   (value: None)" in out


def test_inspect_reports_bad_input_to_the_model(tools, tmp_path, book):
    assert call(tools, "inspect_workbook", tmp_path, path=str(tmp_path / "nope.xlsx")) == (1, f"no such file: {tmp_path / 'nope.xlsx'}\n")
    (tmp_path / "bad.xlsx").write_text("not a zip")
    rc, out = call(tools, "inspect_workbook", tmp_path, path=str(tmp_path / "bad.xlsx"))
    assert rc == 1 and "cannot open" in out
    rc, out = call(tools, "inspect_workbook", tmp_path, path=str(book), sheet="Missing")
    assert rc == 1 and "no sheet 'Missing'" in out and "'Orders'" in out
    rc, out = call(tools, "inspect_workbook", tmp_path, path=str(book), range="nonsense")
    assert rc == 1 and "cannot read range" in out


def test_write_cells_writes_values_and_formulas_to_a_new_file(tools, tmp_path, book):
    out_path = tmp_path / "out" / "o.xlsx"
    rc, out = call(tools, "write_cells", tmp_path, path=str(book), sheet="Orders", output=str(out_path),
                   cells={"D3": "=B3*C3", "E1": "Flag", "b3": 4, "C3": 1.25, "A3": None})
    assert rc == 0, out
    assert "Orders!D3: None -> '=B3*C3'" in out and f"saved {out_path}" in out
    ws = openpyxl.load_workbook(out_path)["Orders"]
    assert (ws["D3"].value, ws["E1"].value, ws["B3"].value, ws["C3"].value) == ("=B3*C3", "Flag", 4, 1.25)
    assert openpyxl.load_workbook(book)["Orders"]["E1"].value is None  # the input is untouched


def test_write_cells_validates_everything_before_writing(tools, tmp_path, book):
    before = book.read_bytes()
    rc, out = call(tools, "write_cells", tmp_path, path=str(book),
                   cells={"D3": "=SUM(B2:B3", "A0": 1, "ZZ": 2, "B9": [1, 2], "C4": 5})
    assert rc == 1 and out.startswith("nothing written")
    assert "unbalanced parentheses" in out and "'A0' is not a cell reference" in out
    assert "'ZZ' is not a cell reference" in out and "B9: value must be" in out
    assert book.read_bytes() == before
    rc, out = call(tools, "write_cells", tmp_path, path=str(book), sheet="New", cells={"A1": 1})
    assert rc == 1 and "create_sheet" in out
    rc, out = call(tools, "write_cells", tmp_path, path=str(book), sheet="New", create_sheet=True, cells={"A1": 1})
    assert rc == 0 and openpyxl.load_workbook(book)["New"]["A1"].value == 1


def test_the_spreadsheet_harness_round_trips_in_the_canonical_layout(tmp_path):
    """The optimizer saves revisions with Harness.save(); the shipped folder is already what it writes."""
    folder = resolve_harness("spreadsheet")
    h = load_harness(folder)
    h.save(tmp_path / "h")
    assert load_harness(tmp_path / "h").content_hash() == h.content_hash()
    for shipped in folder.rglob("*"):
        if shipped.is_file():
            rel = shipped.relative_to(folder)
            assert (tmp_path / "h" / rel).read_text() == shipped.read_text(), rel
