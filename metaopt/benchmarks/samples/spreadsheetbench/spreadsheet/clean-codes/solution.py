"""Oracle for clean-codes: python3 solution.py INPUT OUTPUT."""
import sys

import openpyxl

wb = openpyxl.load_workbook(sys.argv[1])
ws = wb.worksheets[0]
for r in range(2, ws.max_row + 1):
    ws[f"B{r}"] = ws[f"A{r}"].value.strip().upper()
wb.save(sys.argv[2])
