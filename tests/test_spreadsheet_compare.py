"""SpreadsheetBench comparison rules (benchmarks/spreadsheet/compare.py) on hand-made workbooks."""

from __future__ import annotations

import datetime as dt

import openpyxl
import pytest

from metaopt.benchmarks.spreadsheet.compare import (
    AnswerPositionError,
    Area,
    ScorerError,
    compare,
    load_values,
    parse_answer_position,
    same,
    transform,
)


def book(sheets: dict[str, dict[str, object]]) -> openpyxl.Workbook:
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for title, cells in sheets.items():
        ws = wb.create_sheet(title)
        for ref, v in cells.items():
            ws[ref] = v
    return wb


# answer_position parsing

def test_single_cell_and_range_without_sheet():
    assert parse_answer_position("B7") == [Area(None, 2, 2, 7, 7)]
    assert parse_answer_position("A1:C9") == [Area(None, 1, 3, 1, 9)]
    assert parse_answer_position("$a$1:$c$9") == [Area(None, 1, 3, 1, 9)]


def test_sheet_qualified_quoted_and_multiple_ranges():
    areas = parse_answer_position("'Sheet 1'!A1:A3,Summary!B2,'Q1, Q2'!C1:D2")
    assert areas == [Area("Sheet 1", 1, 1, 1, 3), Area("Summary", 2, 2, 2, 2), Area("Q1, Q2", 3, 4, 1, 2)]


def test_quotes_around_the_range_and_non_breaking_spaces_are_stripped():
    assert parse_answer_position("'Data'!'A1:B2'") == [Area("Data", 1, 2, 1, 2)]
    assert parse_answer_position("Data!A1:B2,\u00a0C3") == [Area("Data", 1, 2, 1, 2), Area(None, 3, 3, 3, 3)]


def test_upstream_malformed_forms_are_read():
    # column-only ranges: rows open, bounded by the used rows when comparing
    assert parse_answer_position("A:G") == [Area(None, 1, 7, None, None)]
    # `BD2:308` (upstream typo): the end's column is the start's
    assert parse_answer_position("BD2:308") == [Area(None, 56, 56, 2, 308)]


@pytest.mark.parametrize("bad", ["", "   ", "A1:", "Sheet1!", "hello", "A1,,B2", "A0", "ZZZZ1"])
def test_unparsable_positions_raise_naming_the_part(bad):
    with pytest.raises(AnswerPositionError):
        parse_answer_position(bad)


# value rules

def test_numbers_are_rounded_to_two_decimals_and_bools_are_numbers():
    assert same(1.234, 1.23) and same(2, 2.0) and same(True, 1) and same(False, 0.0)
    assert not same(1.24, 1.23)
    assert same("5", 5) and same(" 3.14159 ", 3.14)  # numeric strings compare as numbers


def test_text_is_exact():
    assert same("North", "North")
    assert not same("North", "north") and not same("North", "North ")


def test_empty_equals_none_but_not_zero():
    assert same(None, "") and same("", None) and same(None, None)
    assert not same(None, 0) and not same("", 0.0)


def test_dates_become_excel_serials_of_whole_days():
    d = dt.datetime(2025, 3, 1)
    assert transform(d) == 45717.0
    assert same(d, dt.datetime(2025, 3, 1, 9, 0))          # the time of day rounds away
    assert same(d, dt.date(2025, 3, 1)) and same(d, 45717)  # a serial number equals the date
    assert not same(d, dt.datetime(2025, 3, 2))
    assert not same(d, "2025-03-01")                        # text is not a date
    assert transform(dt.time(9, 5, 30)) == "09:05"


def test_type_mismatch_after_transform_fails():
    assert not same(12, "twelve") and not same("1.0.0", 1.0)


# workbook comparison

def test_multi_range_comparison_reports_each_bad_cell():
    ans = book({"S": {"A1": 1, "A2": 2, "C1": "x"}})
    out = book({"S": {"A1": 1, "A2": 3, "C1": "y", "Z9": "ignored, outside the ranges"}})
    r = compare(ans, out, parse_answer_position("S!A1:A2,S!C1"))
    assert not r["passed"] and r["n_cells"] == 3 and r["n_mismatches"] == 2
    assert r["mismatches"] == [{"cell": "S!A2", "expected": 2, "actual": 3},
                               {"cell": "S!C1", "expected": "x", "actual": "y"}]
    assert compare(ans, out, parse_answer_position("S!A1"))["passed"]


def test_bare_range_means_the_answer_workbooks_first_sheet():
    ans = book({"First": {"A1": 1}, "Second": {"A1": 2}})
    out = book({"Second": {"A1": 2}, "First": {"A1": 1}})  # order differs in the output
    assert compare(ans, out, parse_answer_position("A1"))["passed"]


def test_sheet_missing_in_output_fails_the_case_missing_in_answer_is_a_task_error():
    ans = book({"Data": {"A1": 1}})
    r = compare(ans, book({"Other": {"A1": 1}}), parse_answer_position("Data!A1"))
    assert not r["passed"] and "no sheet 'Data'" in r["reason"]
    with pytest.raises(ScorerError, match="no sheet 'Nope'"):
        compare(ans, book({"Nope": {}}), parse_answer_position("Nope!A1"))


def test_whole_columns_cover_the_rows_used_by_either_workbook():
    ans = book({"S": {"A1": "h", "A2": 1}})
    out = book({"S": {"A1": "h", "A2": 1, "A5": "extra row"}})
    r = compare(ans, out, parse_answer_position("A:A"))
    assert r["n_cells"] == 5 and r["mismatches"] == [{"cell": "S!A5", "expected": None, "actual": "extra row"}]


def test_formulas_compare_by_value_and_uncached_formulas_show_their_text(tmp_path):
    # The answer holds a value; the output a formula. openpyxl writes no cached value, so without
    # recalculation it reads as empty; the mismatch record carries the formula for feedback.
    ans = book({"S": {"A1": 2, "A2": 3, "A3": 6}})
    out = book({"S": {"A1": 2, "A2": 3, "A3": "=A1*A2"}})
    out.save(tmp_path / "out.xlsx")
    r = compare(ans, load_values(str(tmp_path / "out.xlsx")), parse_answer_position("A3"),
                formulas_wb=openpyxl.load_workbook(tmp_path / "out.xlsx"))
    assert r["mismatches"] == [{"cell": "S!A3", "expected": 6, "actual": None, "formula": "=A1*A2"}]


def test_cached_formula_values_are_what_is_compared(tmp_path):
    # A workbook saved by a spreadsheet program carries cached values; fake one by writing the
    # cached value into the sheet XML as Excel does.
    import zipfile

    book({"S": {"A1": 2, "A2": 3, "A3": "=A1*A2"}}).save(tmp_path / "f.xlsx")
    with zipfile.ZipFile(tmp_path / "f.xlsx") as z:
        parts = {n: z.read(n) for n in z.namelist()}
    sheet = "xl/worksheets/sheet1.xml"
    parts[sheet] = parts[sheet].replace(b"<f>A1*A2</f><v></v>", b"<f>A1*A2</f><v>6</v>").replace(
        b"<f>A1*A2</f><v />", b"<f>A1*A2</f><v>6</v>")
    assert b"<v>6</v>" in parts[sheet]
    with zipfile.ZipFile(tmp_path / "cached.xlsx", "w") as z:
        for n, data in parts.items():
            z.writestr(n, data)
    ans = book({"S": {"A3": 6}})
    assert compare(ans, load_values(str(tmp_path / "cached.xlsx")), parse_answer_position("A3"))["passed"]


def test_a_range_selecting_no_cell_is_a_task_error_not_a_vacuous_pass():
    ans = book({"S": {}})
    with pytest.raises(ScorerError, match="selects no cell"):
        compare(ans, book({"S": {}}), parse_answer_position("A:A"))


def test_an_answer_formula_nobody_computed_is_a_task_error_not_an_empty_cell(tmp_path):
    book({"S": {"A1": 2, "A2": "=A1*3"}}).save(tmp_path / "ans.xlsx")
    ans = load_values(str(tmp_path / "ans.xlsx"))
    out = book({"S": {"A2": None}})
    assert compare(ans, out, parse_answer_position("A2"))["passed"]  # what upstream would conclude
    with pytest.raises(ScorerError, match="S!A2 holds a formula with no cached value"):
        compare(ans, out, parse_answer_position("A2"), answer_formulas_wb=openpyxl.load_workbook(tmp_path / "ans.xlsx"))
