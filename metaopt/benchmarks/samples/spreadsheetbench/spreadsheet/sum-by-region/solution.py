"""Oracle for sum-by-region: python3 solution.py INPUT OUTPUT."""
import sys

import openpyxl

wb = openpyxl.load_workbook(sys.argv[1])
totals = {}
for region, amount in wb["Sales"].iter_rows(min_row=2, values_only=True):
    totals[region] = totals.get(region, 0) + amount
s = wb["Summary"]
for r in range(2, s.max_row + 1):
    s[f"B{r}"] = totals.get(s[f"A{r}"].value, 0)
wb.save(sys.argv[2])
