"""Oracle for fill-blanks: python3 solution.py INPUT OUTPUT."""
import sys

import openpyxl

wb = openpyxl.load_workbook(sys.argv[1])
ws = wb.worksheets[0]
for r in range(2, ws.max_row + 1):
    if ws[f"B{r}"].value is None:
        ws[f"B{r}"] = 0
wb.save(sys.argv[2])
