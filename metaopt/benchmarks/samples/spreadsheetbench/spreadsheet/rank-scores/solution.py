"""Oracle for rank-scores: python3 solution.py INPUT OUTPUT."""
import sys

import openpyxl

wb = openpyxl.load_workbook(sys.argv[1])
ws = wb["Scores"]
n = ws.max_row
for r in range(2, n + 1):
    ws[f"C{r}"] = f"=RANK(B{r},$B$2:$B${n})"
wb.save(sys.argv[2])
