"""Oracle for filter-high: python3 solution.py INPUT OUTPUT."""
import sys

import openpyxl

wb = openpyxl.load_workbook(sys.argv[1])
high = wb.create_sheet("High")
for i, row in enumerate(wb["Data"].iter_rows(values_only=True)):
    if i == 0 or row[2] > 100:
        high.append(list(row))
wb.save(sys.argv[2])
