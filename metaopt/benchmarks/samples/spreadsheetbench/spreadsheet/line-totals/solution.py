"""Oracle for line-totals: python3 solution.py INPUT OUTPUT."""
import sys

import openpyxl

wb = openpyxl.load_workbook(sys.argv[1])
ws = wb["Orders"]
for r in range(2, ws.max_row + 1):
    ws[f"D{r}"] = f"=B{r}*C{r}"
wb.save(sys.argv[2])
