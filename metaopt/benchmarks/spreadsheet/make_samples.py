"""Builds `spreadsheetbench-sample` (benchmarks/samples/spreadsheetbench): our own tasks in the
raw SpreadsheetBench layout, written with openpyxl. Run `python -m metaopt.benchmarks.spreadsheet.make_samples`
after editing; the output is committed (deterministic: fixed seeds, fixed workbook timestamps).

Each task has input and answer workbooks per test case and a `solution.py` (`python3
solution.py INPUT OUTPUT`), the oracle. Answers are computed here, independently of the solution
scripts, so the oracle check tests both. Every case's input must fail its own answer check
(no vacuous task, SpreadsheetBench issue #7).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import random
import re
import shutil
import textwrap
import zipfile
from pathlib import Path

import openpyxl

from metaopt.benchmarks.spreadsheet.compare import compare, parse_answer_position

OUT = Path(__file__).parent.parent / "samples" / "spreadsheetbench"
FIXED = dt.datetime(2026, 1, 1)
REGIONS = ["North", "South", "East", "West"]
FIRST = ["Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "John", "Radia", "Ken"]
LAST = ["Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Allen", "Backus", "Perlman", "Thompson"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]


def _wb(title: str, rows: list[list]) -> openpyxl.Workbook:
    wb = openpyxl.Workbook()
    ws = wb.worksheets[0]  # a new workbook's one (active) sheet
    ws.title = title
    for r in rows:
        ws.append(r)
    return wb


def line_totals(rng, k):
    rows = [[f"item-{i}", rng.randint(1, 9), round(rng.uniform(1, 50), 2)] for i in range(10)]
    inp = _wb("Orders", [["Item", "Qty", "Price", "Total"], *rows])
    ans = _wb("Orders", [["Item", "Qty", "Price", "Total"], *rows])
    for i in range(10):  # the answer holds formulas: the scorer must recalculate it
        ans["Orders"][f"D{i + 2}"] = f"=B{i + 2}*C{i + 2}"
    return inp, ans


def sum_by_region(rng, k):
    sales = [[rng.choice(REGIONS), rng.randint(10, 500)] for _ in range(20)]
    inp = _wb("Sales", [["Region", "Amount"], *sales])
    summary = inp.create_sheet("Summary")
    summary.append(["Region", "Total"])
    for r in REGIONS:
        summary.append([r])
    ans = _wb("Sales", [["Region", "Amount"], *sales])
    s = ans.create_sheet("Summary")
    s.append(["Region", "Total"])
    for r in REGIONS:
        s.append([r, sum(a for g, a in sales if g == r)])
    return inp, ans


def due_dates(rng, k):
    base = dt.datetime(2025, 1, 1) + dt.timedelta(days=rng.randint(0, 300))
    rows = [[f"INV-{k}{i:02d}", base + dt.timedelta(days=rng.randint(0, 60)), rng.choice([15, 30, 45])] for i in range(8)]
    head = ["Invoice", "Issued", "Terms (days)", "Due"]
    inp = _wb("Invoices", [head, *rows])
    ans = _wb("Invoices", [head, *[[*r, r[1] + dt.timedelta(days=r[2])] for r in rows]])
    return inp, ans


def clean_codes(rng, k):
    codes = ["".join(rng.choice("abcdefxyz") for _ in range(3)) + str(rng.randint(10, 99)) for _ in range(8)]
    messy = [("  " if i % 2 else "") + c + (" " if i % 3 else "") for i, c in enumerate(codes)]
    inp = _wb("Codes", [["Raw", "Clean"], *[[m] for m in messy]])
    ans = _wb("Codes", [["Raw", "Clean"], *[[m, c.upper()] for m, c in zip(messy, codes)]])
    return inp, ans


def split_names(rng, k):
    people = [(rng.choice(FIRST), rng.choice(LAST)) for _ in range(8)]
    inp = _wb("People list", [["Name", "First", "Last"], *[[f"{l}, {f}"] for f, l in people]])
    ans = _wb("People list", [["Name", "First", "Last"], *[[f"{l}, {f}", f, l] for f, l in people]])
    return inp, ans


def rank_scores(rng, k):
    scores = rng.sample(range(40, 100), 10)
    inp = _wb("Scores", [["Student", "Score", "Rank"], *[[f"s{i}", s] for i, s in enumerate(scores)]])
    order = sorted(scores, reverse=True)
    ans = _wb("Scores", [["Student", "Score", "Rank"], *[[f"s{i}", s, order.index(s) + 1] for i, s in enumerate(scores)]])
    return inp, ans


def filter_rows(rng, k):
    rows = [[f"p{i}", rng.choice(REGIONS), rng.randint(20, 200)] for i in range(12)]
    inp = _wb("Data", [["Product", "Region", "Amount"], *rows])
    ans = _wb("Data", [["Product", "Region", "Amount"], *rows])
    high = ans.create_sheet("High")
    high.append(["Product", "Region", "Amount"])
    for r in rows:
        if r[2] > 100:
            high.append(r)
    return inp, ans


def transpose_table(rng, k):
    table = [["Metric", "Q1", "Q2", "Q3", "Q4"], *[[m, *[rng.randint(1, 99) for _ in range(4)]] for m in ("Users", "Orders", "Refunds")]]
    inp = _wb("Table", table)
    ans = _wb("Table", table)
    t = ans.create_sheet("Transposed")
    for col in zip(*table):
        t.append(list(col))
    return inp, ans


def running_balance(rng, k):
    amounts = [round(rng.uniform(-80, 120), 2) for _ in range(10)]
    inp = _wb("Ledger", [["Entry", "Amount", "Balance"], *[[f"e{i}", a] for i, a in enumerate(amounts)]])
    bal, rows = 0.0, []
    for i, a in enumerate(amounts):
        bal += a
        rows.append([f"e{i}", a, round(bal, 2)])
    return inp, _wb("Ledger", [["Entry", "Amount", "Balance"], *rows])


def month_names(rng, k):
    dates = [dt.datetime(2025, rng.randint(1, 12), rng.randint(1, 28)) for _ in range(8)]
    inp = _wb("Events", [["Date", "Month"], *[[d] for d in dates]])
    ans = _wb("Events", [["Date", "Month"], *[[d, MONTHS[d.month - 1]] for d in dates]])
    return inp, ans


def rename_total(rng, k):
    vals = [rng.randint(1, 1000) for _ in range(10)]
    inp = _wb("Sheet1", [["Value"], *[[v] for v in vals]])
    ans = _wb("Report", [["Value"], *[[v] for v in vals]])
    ans["Report"]["A12"] = "Total"
    ans["Report"]["B12"] = sum(vals)
    return inp, ans


def fill_blanks(rng, k):
    vals = [rng.randint(1, 50) if i % 3 else None for i in range(9)]
    inp = _wb("Stock", [["Item", "Count"], *[[f"i{n}", v] for n, v in enumerate(vals)]])
    ans = _wb("Stock", [["Item", "Count"], *[[f"i{n}", 0 if v is None else v] for n, v in enumerate(vals)]])
    return inp, ans


# id, type, instruction, answer_position, builder, cases, naming, solution body (INP/OUT given)
TASKS = [
    ("line-totals", "Cell-Level Manipulation", "Fill the Total column with Qty times Price for every order.",
     "Orders!D2:D11", line_totals, 3, "912", """
        ws = wb["Orders"]
        for r in range(2, ws.max_row + 1):
            ws[f"D{r}"] = f"=B{r}*C{r}"
     """),
    ("sum-by-region", "Cell-Level Manipulation", "On the Summary sheet, fill in each region's total sales amount from the Sales sheet.",
     "Summary!B2:B5", sum_by_region, 3, "912", """
        totals = {}
        for region, amount in wb["Sales"].iter_rows(min_row=2, values_only=True):
            totals[region] = totals.get(region, 0) + amount
        s = wb["Summary"]
        for r in range(2, s.max_row + 1):
            s[f"B{r}"] = totals.get(s[f"A{r}"].value, 0)
     """),
    ("due-dates", "Cell-Level Manipulation", "Each invoice is due its terms in days after it was issued. Fill the Due column with the due date.",
     "Invoices!D2:D9", due_dates, 3, "912", """
        import datetime
        ws = wb["Invoices"]
        for r in range(2, ws.max_row + 1):
            ws[f"D{r}"] = ws[f"B{r}"].value + datetime.timedelta(days=ws[f"C{r}"].value)
            ws[f"D{r}"].number_format = "yyyy-mm-dd"
     """),
    ("clean-codes", "Cell-Level Manipulation", "The raw product codes have stray spaces and lower case letters. Put the cleaned code (no surrounding spaces, upper case) next to each one.",
     "B2:B9", clean_codes, 3, "912", """
        ws = wb.worksheets[0]
        for r in range(2, ws.max_row + 1):
            ws[f"B{r}"] = ws[f"A{r}"].value.strip().upper()
     """),
    ("split-names", "Cell-Level Manipulation", "Names are written 'Last, First'. Split each into the First and Last columns.",
     "'People list'!B2:B9,'People list'!C2:C9", split_names, 3, "912", """
        ws = wb["People list"]
        for r in range(2, ws.max_row + 1):
            last, first = [p.strip() for p in ws[f"A{r}"].value.split(",", 1)]
            ws[f"B{r}"], ws[f"C{r}"] = first, last
     """),
    ("rank-scores", "Cell-Level Manipulation", "Rank the students by score, highest score rank 1, in the Rank column.",
     "Scores!C2:C11", rank_scores, 3, "912", """
        ws = wb["Scores"]
        n = ws.max_row
        for r in range(2, n + 1):
            ws[f"C{r}"] = f"=RANK(B{r},$B$2:$B${n})"
     """),
    ("filter-high", "Sheet-Level Manipulation", "Create a sheet named High with the header row and every row of Data whose Amount is over 100, in their original order.",
     "High!A1:C13", filter_rows, 3, "912", """
        high = wb.create_sheet("High")
        for i, row in enumerate(wb["Data"].iter_rows(values_only=True)):
            if i == 0 or row[2] > 100:
                high.append(list(row))
     """),
    ("transpose-table", "Sheet-Level Manipulation", "Add a sheet named Transposed holding the Table sheet's table transposed (rows become columns), starting at A1.",
     "Transposed!A1:D5", transpose_table, 3, "912", """
        rows = list(wb["Table"].iter_rows(values_only=True))
        t = wb.create_sheet("Transposed")
        for col in zip(*rows):
            t.append(list(col))
     """),
    ("running-balance", "Cell-Level Manipulation", "Fill the Balance column with the running total of Amount, starting from 0.",
     "Ledger!C2:C11", running_balance, 3, "912", """
        ws = wb["Ledger"]
        ws["C2"] = "=B2"
        for r in range(3, ws.max_row + 1):
            ws[f"C{r}"] = f"=C{r - 1}+B{r}"
     """),
    ("month-names", "Cell-Level Manipulation", "Write the English month name (e.g. March) of each event's date in the Month column.",
     "Events!B2:B9", month_names, 3, "912", """
        ws = wb["Events"]
        for r in range(2, ws.max_row + 1):
            ws[f"B{r}"] = ws[f"A{r}"].value.strftime("%B")
     """),
    ("rename-total", "Sheet-Level Manipulation", "Rename the sheet to Report. In the row right below the last value, write Total in column A and the sum of the values in column B.",
     "Report!A12:B12", rename_total, 1, "verified", """
        ws = wb.worksheets[0]
        ws.title = "Report"
        last = ws.max_row
        ws[f"A{last + 1}"] = "Total"
        ws[f"B{last + 1}"] = sum(c.value for c in ws["A"][1:last])
     """),
    ("fill-blanks", "Cell-Level Manipulation", "Some item counts are empty. Put 0 in every empty count.",
     "B2:B10", fill_blanks, 1, "verified-bare", """
        ws = wb.worksheets[0]
        for r in range(2, ws.max_row + 1):
            if ws[f"B{r}"].value is None:
                ws[f"B{r}"] = 0
     """),
]

SOLUTION = '''"""Oracle for {tid}: python3 solution.py INPUT OUTPUT."""
import sys

import openpyxl

wb = openpyxl.load_workbook(sys.argv[1])
{body}
wb.save(sys.argv[2])
'''


def _names(tid: str, k: int, naming: str) -> tuple[str, str]:
    if naming == "verified":
        return f"{k}_{tid}_init.xlsx", f"{k}_{tid}_golden.xlsx"
    if naming == "verified-bare":
        return "initial.xlsx", "golden.xlsx"
    return f"{k}_{tid}_input.xlsx", f"{k}_{tid}_answer.xlsx"


def _save(wb: openpyxl.Workbook, path: Path) -> None:
    """Save with fixed document and zip-member timestamps: a rebuild gives the same bytes, so
    the task images' content hashes do not change."""
    wb.properties.created = wb.properties.modified = FIXED
    buf = io.BytesIO()
    wb.save(buf)
    with zipfile.ZipFile(buf) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=FIXED.timetuple()[:6])
            fixed.compress_type, fixed.external_attr = zipfile.ZIP_DEFLATED, info.external_attr
            data = src.read(info.filename)
            if info.filename == "docProps/core.xml":  # openpyxl stamps `modified` with the time of saving
                data = re.sub(rb"(<dcterms:modified[^>]*>)[^<]*", rb"\g<1>2026-01-01T00:00:00Z", data)
            dst.writestr(fixed, data)


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    records = []
    for n, (tid, kind, text, pos, build, ncases, naming, body) in enumerate(TASKS):
        folder = OUT / "spreadsheet" / tid
        folder.mkdir(parents=True)
        for k in range(1, ncases + 1):
            inp, ans = build(random.Random(f"{tid}-{k}"), k)
            if not any(isinstance(c.value, str) and c.value.startswith("=") for ws in ans for row in ws.iter_rows() for c in row):
                assert not compare(ans, inp, parse_answer_position(pos))["passed"], f"{tid} case {k}: the input already passes"
            i_name, a_name = _names(tid, k, naming)
            _save(inp, folder / i_name)
            _save(ans, folder / a_name)
        (folder / "solution.py").write_text(SOLUTION.format(tid=tid, body=textwrap.dedent(body).strip("\n")))
        records.append({"id": tid, "instruction": text, "spreadsheet_path": f"spreadsheet/{tid}",
                        "instruction_type": kind, "answer_position": pos,
                        "answer_sheet": pos.split("!")[0].strip("'") if "!" in pos else None})
    (OUT / "dataset.json").write_text(json.dumps(records, indent=2) + "\n")
    print(f"wrote {len(records)} tasks to {OUT}")


if __name__ == "__main__":
    main()
