"""Oracle for running-balance: python3 solution.py INPUT OUTPUT."""
import sys

import openpyxl

wb = openpyxl.load_workbook(sys.argv[1])
ws = wb["Ledger"]
ws["C2"] = "=B2"
for r in range(3, ws.max_row + 1):
    ws[f"C{r}"] = f"=C{r - 1}+B{r}"
wb.save(sys.argv[2])
