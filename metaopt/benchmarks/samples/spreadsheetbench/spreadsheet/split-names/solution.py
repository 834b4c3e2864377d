"""Oracle for split-names: python3 solution.py INPUT OUTPUT."""
import sys

import openpyxl

wb = openpyxl.load_workbook(sys.argv[1])
ws = wb["People list"]
for r in range(2, ws.max_row + 1):
    last, first = [p.strip() for p in ws[f"A{r}"].value.split(",", 1)]
    ws[f"B{r}"], ws[f"C{r}"] = first, last
wb.save(sys.argv[2])
