"""SpreadsheetBench comparison rules: answer_position parsing and cell-by-cell value comparison.

This exact file is copied into the sandbox at verify time (next to evaluate.py) and also
imported on the host by the loader and the tests, so it depends only on the standard library
and openpyxl (Debian's python3-openpyxl 3.0 in the image, PyPI's 3.1 on the host).

Rules (shared/reference/benchmark-formats.md section 3.2, with the known upstream parsing bugs
fixed): values only, never formatting; numbers (bools included, TRUE == 1) and numeric strings
rounded to 2 decimals; datetimes as Excel serials (epoch 1899-12-30) rounded to whole days;
times as "HH:MM"; None equals ""; after that transform the values must be equal, type included.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

EXCEL_EPOCH = dt.datetime(1899, 12, 30)
MAX_MISMATCHES = 50  # per case: enough feedback for the meta-agent, bounded result size

_CELL = re.compile(r"^\$?([A-Z]{1,3})\$?(\d+)$")
_COLS = re.compile(r"^\$?([A-Z]{1,3})$")
_ROWS = re.compile(r"^\$?(\d+)$")


class AnswerPositionError(ValueError):
    """answer_position cannot be parsed. The message quotes the bad part."""


class ScorerError(Exception):
    """The task itself is broken (unreadable answer workbook, sheet absent from the answer,
    a range that selects no cell): the trial is an error, never a score."""


@dataclass(frozen=True)
class Area:
    """One rectangular range. sheet None = the answer workbook's first sheet; rows None =
    whole columns (bounded by the used rows of answer and output at comparison time)."""

    sheet: str | None
    min_col: int
    max_col: int
    min_row: int | None
    max_row: int | None

    def label(self) -> str:
        rows = "" if self.min_row is None else f"{self.min_row}-{self.max_row}"
        return f"{self.sheet or '<first sheet>'}!cols {self.min_col}-{self.max_col} rows {rows or 'all'}"


def col_index(letters: str) -> int:
    n = 0
    for ch in letters:
        n = n * 26 + ord(ch) - 64
    return n


def col_letters(n: int) -> str:
    s = ""
    while n:
        n, r = divmod(n - 1, 26)
        s = chr(65 + r) + s
    return s


def _split_top(text: str) -> list[str]:
    """Split on commas outside single quotes (sheet names may hold commas)."""
    parts, cur, quoted = [], "", False
    for ch in text:
        if ch == "'":
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def _unquote(s: str) -> str:
    s = s.strip()
    if len(s) >= 2 and s[0] == s[-1] == "'":
        s = s[1:-1].replace("''", "'")
    return s.strip("'")


def parse_range(text: str, sheet: str | None = None) -> Area:
    """`A1`, `A1:C9`, `$A$1:$C$9`, whole columns `A:G`, whole rows `2:5`, and the malformed
    upstream form `BD2:308` (the end's column is the start's)."""
    t = text.strip().upper()
    a, colon, b = t.partition(":")
    if colon and not b:
        raise AnswerPositionError(f"cannot read range {text.strip()!r}")
    b = b or a
    ma, mb = _CELL.match(a), _CELL.match(b)
    ca, cb, ra, rb = _COLS.match(a), _COLS.match(b), _ROWS.match(a), _ROWS.match(b)
    if ma and mb:
        c1, r1, c2, r2 = col_index(ma[1]), int(ma[2]), col_index(mb[1]), int(mb[2])
    elif ma and rb:
        c1, r1, c2, r2 = col_index(ma[1]), int(ma[2]), col_index(ma[1]), int(rb[1])
    elif ca and cb:
        lo, hi = sorted((col_index(ca[1]), col_index(cb[1])))
        return Area(sheet, lo, hi, None, None)
    elif ra and rb:
        lo, hi = sorted((int(ra[1]), int(rb[1])))
        return Area(sheet, 1, 16384, lo, hi)  # bounded by used columns at comparison time
    else:
        raise AnswerPositionError(f"cannot read range {text.strip()!r}")
    if min(r1, r2) < 1:
        raise AnswerPositionError(f"cannot read range {text.strip()!r}: rows start at 1")
    return Area(sheet, min(c1, c2), max(c1, c2), min(r1, r2), max(r1, r2))


def parse_answer_position(position: str) -> list[Area]:
    """Comma-separated ranges, each `range` or `sheet!range` (quotes stripped from both).
    Raises AnswerPositionError naming the part it could not read."""
    if not isinstance(position, str) or not position.strip():
        raise AnswerPositionError("answer_position is empty")
    text = position.replace("\u00a0", " ").replace("\u200b", "")
    areas = []
    for part in _split_top(text):
        if not part.strip():
            raise AnswerPositionError(f"empty range in {position!r}")
        sheet, bang, rng = part.rpartition("!")
        try:
            areas.append(parse_range(_unquote(rng), _unquote(sheet) if bang else None))
        except AnswerPositionError as e:
            raise AnswerPositionError(f"{e} in answer_position {position!r}") from None
    return areas


def transform(value: object) -> object:
    """The comparable form of a cell value (see the module docstring)."""
    if value is None:
        return ""
    if isinstance(value, (bool, int, float)):
        return round(float(value), 2)
    if isinstance(value, dt.datetime):
        return float(round((value - EXCEL_EPOCH).total_seconds() / 86400))
    if isinstance(value, dt.date):
        return float((value - EXCEL_EPOCH.date()).days)
    if isinstance(value, dt.time):
        return value.strftime("%H:%M")
    if isinstance(value, dt.timedelta):
        return round(value.total_seconds() / 86400, 2)
    if isinstance(value, str):
        try:
            return round(float(value), 2)
        except ValueError:
            return value
    return str(value)


def same(expected: object, actual: object) -> bool:
    """Equal after transform, type included (a string never equals a number)."""
    a, b = transform(expected), transform(actual)
    return type(a) is type(b) and a == b


def load_values(path: str):
    """The workbook with cached formula values (openpyxl data_only). Raises what openpyxl raises."""
    import openpyxl

    return openpyxl.load_workbook(path, data_only=True)


def _sheet(wb, name: str | None, first_sheet: str):
    name = name or first_sheet
    for ws in wb.worksheets:
        if ws.title == name:
            return ws
    for ws in wb.worksheets:  # Excel sheet names are case-insensitive
        if ws.title.lower() == name.lower():
            return ws
    return None


def compare(answer_wb, output_wb, areas: list[Area], formulas_wb=None, answer_formulas_wb=None) -> dict:
    """Compare `output_wb` with `answer_wb` on `areas`. Returns {passed, reason, n_cells,
    n_mismatches, mismatches: [{cell, expected, actual, formula?}]}. A sheet missing from the
    output fails the case; one missing from the answer, or areas selecting no cell, raise
    ScorerError. `formulas_wb` (the output loaded with formulas) adds the formula of a
    mismatching cell to its record. `answer_formulas_wb` (the answer loaded with formulas, given
    when it was not recalculated) turns an answer formula without a cached value into a
    ScorerError: its expected value is unknown, and reading it as empty would be wrong."""
    first = answer_wb.worksheets[0].title
    mismatches: list[dict] = []
    n_cells = n_bad = 0
    for area in areas:
        want = _sheet(answer_wb, area.sheet, first)
        if want is None:
            raise ScorerError(f"answer workbook has no sheet {area.sheet!r} "
                              f"(has: {', '.join(ws.title for ws in answer_wb.worksheets)})")
        got = _sheet(output_wb, want.title, first)
        if got is None:
            return {"passed": False, "reason": f"output has no sheet {want.title!r} "
                    f"(has: {', '.join(ws.title for ws in output_wb.worksheets)})",
                    "n_cells": n_cells, "n_mismatches": n_bad, "mismatches": mismatches}
        # Open ends (whole columns or rows) stop at the last cell used in either workbook.
        min_row, max_row = area.min_row or 1, area.max_row or max(_used(want)[0], _used(got)[0])
        max_col = area.max_col if area.max_col < 16384 else max(_used(want)[1], _used(got)[1])
        for r in range(min_row, max_row + 1):
            for c in range(area.min_col, max_col + 1):
                n_cells += 1
                e, a = want.cell(row=r, column=c).value, got.cell(row=r, column=c).value
                if e is None and _formula(answer_formulas_wb, want.title, r, c):
                    raise ScorerError(f"answer cell {want.title}!{col_letters(c)}{r} holds a formula with no cached "
                                      f"value and no recalculation engine computed it")
                if same(e, a):
                    continue
                n_bad += 1
                if len(mismatches) < MAX_MISMATCHES:
                    rec = {"cell": f"{want.title}!{col_letters(c)}{r}", "expected": _json(e), "actual": _json(a)}
                    f = _formula(formulas_wb, want.title, r, c)
                    if f is not None:
                        rec["formula"] = f
                    mismatches.append(rec)
    if n_cells == 0:
        raise ScorerError("answer_position selects no cell (an empty range would pass vacuously)")
    reason = None if n_bad == 0 else f"{n_bad} of {n_cells} cells differ"
    return {"passed": n_bad == 0, "reason": reason, "n_cells": n_cells, "n_mismatches": n_bad,
            "mismatches": mismatches}


def _used(ws) -> tuple[int, int]:
    """(last row, last column) holding a value; (0, 0) for an empty sheet (openpyxl says 1, 1)."""
    if ws.max_row == 1 and ws.max_column == 1 and ws.cell(row=1, column=1).value is None:
        return 0, 0
    return ws.max_row, ws.max_column


def _formula(wb, title: str, r: int, c: int) -> str | None:
    if wb is None:
        return None
    ws = _sheet(wb, title, title)
    v = ws.cell(row=r, column=c).value if ws is not None else None
    return v if isinstance(v, str) and v.startswith("=") else None


def _json(v: object) -> object:
    """A JSON-safe rendering of a raw cell value (dates as ISO text)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    return str(v)
